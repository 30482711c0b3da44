// A two-rank collective save through the installed rckpt::mpi: each
// rank writes its half of one row-sharded tensor; then every rank loads the
// whole tensor back and checks it.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "rckpt/mpi.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int rc = 1;
  if (argc == 2) {
    std::vector<float> half = {float(2 * rank), float(2 * rank + 1)};
    rckpt::RankState state;
    state.shards.push_back(rckpt::ShardPart{
        "model", "w", {2 * world}, {2 * rank},
        rckpt::Tensor::Borrow(rckpt::TensorView{half.data(), rckpt::DType::kF32, {2}, {}}),
        std::nullopt, std::nullopt});
    rckpt::Status s = rckpt::SaveDistributed(MPI_COMM_WORLD, argv[1], state);
    rckpt::Result<rckpt::RankLoad> back =
        s.ok() ? rckpt::LoadDistributed(MPI_COMM_WORLD, argv[1], {{"w", {}, {}}})
               : rckpt::Result<rckpt::RankLoad>(s);
    if (!back.ok()) {
      std::fprintf(stderr, "%s\n", back.status().ToString().c_str());
    } else {
      auto got = back->blocks[0].tensor.host_span<float>();
      rc = 0;
      for (size_t i = 0; i < got.size(); ++i) rc |= got[i] != float(i);
      if (rc == 0 && rank == 0) {
        std::printf("consumer: %d ranks saved and loaded %zu floats\n", world, got.size());
      }
    }
  }
  MPI_Finalize();
  return rc;
}
