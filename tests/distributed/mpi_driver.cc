// The MPI side of the distributed tests: run by mpirun from
// distributed_test.cc, one scenario per invocation; every rank checks its
// own outcome and the job's exit status says whether all held.
//
//   rckpt-mpi-driver save DIR STEP CODEC   collective save of the job state
//   rckpt-mpi-driver load DIR STEP         resharded load by this world size
//   rckpt-mpi-driver kill DIR STEP CALL CODEC  rank 1 is SIGKILLed at its CALLth progress call
//   rckpt-mpi-driver fsize DIR STEP        rank 2 may not grow files (EFBIG): all get IoError
//   rckpt-mpi-driver overlap DIR           blocks that overlap: all get InvalidArgument
//   rckpt-mpi-driver hostile DIR           a file whose shards overlap: all get Corruption
//   rckpt-mpi-driver train DIR FROM TO [KILL]  the data-parallel toy run (below) from step
//                                           FROM (0: fresh; else DIR/ck.rckpt) to TO, saving
//                                           DIR/ck.rckpt after every step; SIGKILL after step KILL
#include <mpi.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "distributed/mpi_state.h"
#include "format/file_reader.h"
#include "format/manifest.h"
#include "format/writer.h"
#include "rckpt/mpi.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"

namespace rckpt::testing {
namespace {

int g_rank = 0, g_size = 1;

int Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", g_rank, what.c_str());
  return 1;
}

// This rank's part of the saving job (4 ranks) at `step`.
RankState StateOf(int rank, int step) {
  RankState s;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Tensor global = GlobalValue(g);
    if (g.split_dim < 0) {
      (void)s.local.AddTensor(g.section, g.name, global);
      continue;
    }
    const Block b = PartOf(g.shape, g.split_dim, rank, kSavedRanks);
    s.shards.push_back(ShardPart{g.section, g.name, g.shape, b.offsets, Slice(global, b), {},
                                Device::Cuda(rank)});
  }
  (void)s.local.AddRng("cuda", RngKind::kTorchCuda, RankRngBytes(rank, step),
                       Device::Cuda(rank));
  s.local.Tree() = RankTree(rank, step);
  s.common_tree = CommonTree(step);
  s.local.Metadata()["job"] = "mpi-test";
  return s;
}

// What a single process would save for the same state: whole tensors,
// every rank's RNG records and trees as a collective save names them.
Checkpoint Assembled(int step) {
  Checkpoint ck;
  for (const GlobalTensor& g : GlobalTensors()) {
    (void)ck.AddTensor(g.section, g.name, GlobalValue(g));
  }
  Value& tree = ck.Tree();
  tree["common"] = CommonTree(step);
  tree["ranks"] = Value::List({});
  for (int r = 0; r < kSavedRanks; ++r) {
    (void)ck.AddRng("rank" + std::to_string(r) + "/cuda", RngKind::kTorchCuda,
                    RankRngBytes(r, step), Device::Cuda(r));
    tree["ranks"].Append(RankTree(r, step));
  }
  ck.Metadata()["job"] = "mpi-test";
  ck.Metadata()["rckpt.world_size"] = std::to_string(kSavedRanks);
  return ck;
}

int Save(const std::string& dir, int step, const std::string& codec) {
  SaveOptions o;
  o.codec = codec == "zstd" ? Codec::kZstd : Codec::kNone;
  o.chunk_bytes = 4096;
  o.threads = 1;
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  if (!s.ok()) return Fail(s.ToString());
  if (g_rank == 0) {
    s = rckpt::Save(dir + "/assembled-" + std::to_string(step) + ".rckpt", Assembled(step), o);
    if (!s.ok()) return Fail(s.ToString());
  }
  return 0;
}

// The sharding a loading job of `n` ranks uses: different from the saved
// one wherever the shape allows.
Block WantedBlock(const GlobalTensor& g, int rank, int n) {
  if (g.split_dim < 0) return WholeBlock(g.shape);
  const int dim = g.shape.size() == 2 ? 1 - g.split_dim : 0;
  return PartOf(g.shape, dim, rank, n);
}

int Load(const std::string& dir, int step) {
  std::vector<BlockRequest> wants;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Block b = WantedBlock(g, g_rank, g_size);
    wants.push_back(BlockRequest{g.name, b.offsets, b.sizes});
  }
  // Each rank's model side goes to its own (host-emulated) GPU, everything
  // else to host memory, as model_device places it. Under the stand-in
  // suites (tests/test_runtime.h) the GPUs are rckpt's CUDA runtime over the
  // stand-in driver instead.
  std::unique_ptr<DeviceRuntime> gpus = NewEmulatedRuntime(g_size);
  if (const char* driver = std::getenv("RCKPT_TEST_CUDA_DRIVER")) {
    Result<std::unique_ptr<DeviceRuntime>> cuda = NewCudaRuntime({.driver_library = driver});
    if (!cuda.ok()) return Fail(cuda.status().ToString());
    gpus = std::move(*cuda);
  }
  LoadOptions o;
  o.threads = 1;
  o.runtime = gpus.get();
  o.model_device = DeviceSpec::Of(Device::Cuda(g_rank));
  Result<RankLoad> r = LoadDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", wants, o);
  if (!r.ok()) return Fail(r.status().ToString());
  const std::vector<GlobalTensor> globals = GlobalTensors();
  for (size_t i = 0; i < globals.size(); ++i) {
    const Tensor want = Slice(GlobalValue(globals[i]), WantedBlock(globals[i], g_rank, g_size));
    const Tensor& got = r->blocks[i].tensor;
    const bool model_side = r->blocks[i].role == Role::kModel;
    if (got.device() != (model_side ? Device::Cuda(g_rank) : Device::Cpu())) {
      return Fail("'" + globals[i].name + "' was placed on " + got.device().ToString());
    }
    std::vector<std::byte> bytes(got.nbytes());
    if (got.device().is_cpu()) {
      std::memcpy(bytes.data(), got.data(), bytes.size());
    } else {
      Stream stream = *gpus->CreateStream(got.device());
      Status s = gpus->CopyToHostAsync(got.device(), stream, bytes.data(), got.data(), bytes.size());
      if (s.ok()) s = gpus->Synchronize(got.device(), stream);
      gpus->DestroyStream(got.device(), stream);
      if (!s.ok()) return Fail(s.ToString());
    }
    if (got.shape() != want.shape() || got.dtype() != want.dtype() ||
        std::memcmp(bytes.data(), want.data(), want.nbytes()) != 0) {
      return Fail("block of '" + globals[i].name + "' differs from the global tensor's slice");
    }
  }
  if (!(r->common_tree == CommonTree(step))) return Fail("common tree");
  if (r->saved_world_size != kSavedRanks || r->rank_trees.size() != kSavedRanks) {
    return Fail("saved world size " + std::to_string(r->saved_world_size));
  }
  for (int s = 0; s < kSavedRanks; ++s) {
    if (!(r->rank_trees[s] == RankTree(s, step))) return Fail("tree of rank " + std::to_string(s));
    const auto& rng = r->saved_rng[s];
    if (rng.size() != 1 || rng[0].name != "cuda" || rng[0].bytes != RankRngBytes(s, step)) {
      return Fail("RNG records of saved rank " + std::to_string(s));
    }
  }
  const bool same_world = g_size == kSavedRanks;
  if (same_world != !r->rng.empty() ||
      (same_world && r->rng[0].bytes != RankRngBytes(g_rank, step))) {
    return Fail("own RNG records with world size " + std::to_string(g_size));
  }
  std::printf("rank %d of %d: bytes_read %llu bytes_needed %llu\n", g_rank, g_size,
              static_cast<unsigned long long>(r->bytes_read),
              static_cast<unsigned long long>(r->bytes_needed));
  return 0;
}

int Kill(const std::string& dir, int step, int call, const std::string& codec) {
  SaveOptions o;
  o.codec = codec == "zstd" ? Codec::kZstd : Codec::kNone;
  o.chunk_bytes = 4096;
  o.threads = 1;
  int calls = 0;
  if (g_rank == 1) {
    o.progress = [&](uint64_t, uint64_t) {
      if (++calls == call) std::raise(SIGKILL);
      return true;
    };
  }
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  return Fail("the save returned " + s.ToString() + " instead of being killed");
}

int FileSizeLimit(const std::string& dir, int step) {
  if (g_rank == 2) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{16 << 10, 16 << 10};
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  SaveOptions o;
  o.chunk_bytes = 4096;
  Status s = SaveDistributed(MPI_COMM_WORLD, dir + "/ck.rckpt", StateOf(g_rank, step), o);
  if (s.code() != StatusCode::kIoError || s.message().find("rank 2:") == std::string::npos) {
    return Fail("expected IoError from rank 2, got " + s.ToString());
  }
  return 0;
}

int Overlap(const std::string& dir) {
  RankState s = StateOf(g_rank, 0);
  s.shards[0].offsets[0] = g_rank * 20;  // blocks of 24 rows every 20: overlap
  Status st = SaveDistributed(MPI_COMM_WORLD, dir + "/overlap.rckpt", s, {});
  if (st.code() != StatusCode::kInvalidArgument || st.message().find("overlap") == std::string::npos) {
    return Fail("expected InvalidArgument naming the overlap, got " + st.ToString());
  }
  return 0;
}

// A copy of DIR/ck.rckpt whose fc1 shards 1 and 2 overlap (and so leave a
// gap), manifest and footer rebuilt to match: only the validator can tell.
Status WriteHostile(const std::string& dir) {
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(PosixFileSystem(), dir + "/ck.rckpt"));
  Manifest m = reader->manifest();
  for (TensorMeta& t : m.tensors) {
    if (t.name == "fc1.weight") t.shards[2].offsets = t.shards[1].offsets;
  }
  RCKPT_ASSIGN_OR_RETURN(FlatTree tree, EncodeTree(m.tree));
  const std::vector<uint8_t> manifest = BuildManifestFromMeta(m, tree);
  std::vector<std::byte> head(m.data_end);
  RCKPT_RETURN_IF_ERROR(reader->file().ReadAt(0, head));
  RCKPT_ASSIGN_OR_RETURN(auto out, PosixFileSystem().OpenForWrite(dir + "/hostile.rckpt"));
  RCKPT_RETURN_IF_ERROR(out->Append(head));
  RCKPT_RETURN_IF_ERROR(AppendManifestAndFooter(*out, m.data_end, manifest, m.version_minor));
  return out->Close();
}

int Hostile(const std::string& dir) {
  if (g_rank == 0) {
    Status s = WriteHostile(dir);
    if (!s.ok()) return Fail(s.ToString());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Result<RankLoad> r =
      LoadDistributed(MPI_COMM_WORLD, dir + "/hostile.rckpt", {BlockRequest{"step", {}, {}}});
  if (r.status().code() != StatusCode::kCorruption ||
      r.status().message().find("overlap") == std::string::npos) {
    return Fail("expected Corruption naming the overlap, got " + r.status().ToString());
  }
  return 0;
}

// A data-parallel training run in miniature: a linear model `w` (replicated)
// fitted to a fixed data set by SGD with momentum whose state is sharded
// across the ranks as ZeRO-1 does (each rank owns a flat slice of the
// momentum and updates that slice of w, then the slices are all-gathered).
// The global batch is the same whatever the world size; each rank takes an
// equal share of it, and its gradient is summed by MPI_Allreduce.
constexpr int64_t kDim = 64, kBatch = 8;

float Sample(int64_t i, int64_t d) {  // the data set: x_i[d], target in d = kDim
  uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(d);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<float>(h % 2001) / 1000.0f - 1.0f;
}

int Train(const std::string& dir, int from, int to, int kill_after) {
  const std::string path = dir + "/ck.rckpt";
  const Block mine = PartOf({kDim}, 0, g_rank, g_size);
  std::vector<float> w(kDim, 0.0f), m(mine.sizes[0], 0.0f);
  int64_t seen = 0;
  if (from > 0) {
    Result<RankLoad> r = LoadDistributed(
        MPI_COMM_WORLD, path, {BlockRequest{"w", {}, {}}, BlockRequest{"m", mine.offsets, mine.sizes}});
    if (!r.ok()) return Fail(r.status().ToString());
    std::memcpy(w.data(), r->blocks[0].tensor.data(), kDim * 4);
    std::memcpy(m.data(), r->blocks[1].tensor.data(), m.size() * 4);
    seen = r->common_tree.Find("samples_seen")->as_int();
  }
  for (int step = from + 1; step <= to; ++step) {
    std::vector<float> grad(kDim, 0.0f), sum(kDim, 0.0f);
    const int64_t share = kBatch / g_size, first = seen + g_rank * share;
    for (int64_t i = first; i < first + share; ++i) {
      float err = -Sample(i, kDim);
      for (int64_t d = 0; d < kDim; ++d) err += w[d] * Sample(i, d);
      for (int64_t d = 0; d < kDim; ++d) grad[d] += err * Sample(i, d) / kBatch;
    }
    MPI_Allreduce(grad.data(), sum.data(), kDim, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<float> slice(mine.sizes[0]);
    for (int64_t j = 0; j < mine.sizes[0]; ++j) {
      m[j] = 0.9f * m[j] + sum[mine.offsets[0] + j];
      slice[j] = w[mine.offsets[0] + j] - 0.05f * m[j];
    }
    std::vector<int> counts(g_size), displs(g_size);
    for (int r = 0; r < g_size; ++r) {
      const Block b = PartOf({kDim}, 0, r, g_size);
      counts[r] = static_cast<int>(b.sizes[0]);
      displs[r] = static_cast<int>(b.offsets[0]);
    }
    MPI_Allgatherv(slice.data(), counts[g_rank], MPI_FLOAT, w.data(), counts.data(),
                   displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
    seen += kBatch;
    RankState st;
    (void)st.local.AddTensor("model", "w", *Tensor::FromBytes(DType::kF32, {kDim},
                                                              std::as_bytes(std::span(w))));
    st.shards.push_back(ShardPart{"optimizer", "m", {kDim}, mine.offsets,
                                  *Tensor::FromBytes(DType::kF32, mine.sizes,
                                                     std::as_bytes(std::span(m))),
                                  {}, {}});
    st.common_tree["samples_seen"] = seen;
    st.common_tree["step"] = step;
    st.local.Tree()["next_sample"] = seen + g_rank * (kBatch / g_size);
    Status s = SaveDistributed(MPI_COMM_WORLD, path, st);
    if (!s.ok()) return Fail(s.ToString());
    if (step == kill_after && g_rank == g_size - 1) std::raise(SIGKILL);
  }
  if (g_rank == 0) {
    Checkpoint final_state;
    (void)final_state.AddTensor("model", "w", *Tensor::FromBytes(DType::kF32, {kDim},
                                                                 std::as_bytes(std::span(w))));
    Status s = rckpt::Save(dir + "/final-w.rckpt", final_state);
    if (!s.ok()) return Fail(s.ToString());
  }
  return 0;
}

int Run(int argc, char** argv) {
  if (argc < 3) return Fail("usage: rckpt-mpi-driver MODE DIR [ARGS]");
  const std::string mode = argv[1], dir = argv[2];
  auto arg = [&](int i) { return i < argc ? std::atoi(argv[i]) : 0; };
  if (mode == "save") return Save(dir, arg(3), argc > 4 ? argv[4] : "none");
  if (mode == "load") return Load(dir, arg(3));
  if (mode == "kill") return Kill(dir, arg(3), arg(4), argc > 5 ? argv[5] : "none");
  if (mode == "fsize") return FileSizeLimit(dir, arg(3));
  if (mode == "overlap") return Overlap(dir);
  if (mode == "hostile") return Hostile(dir);
  if (mode == "train") return Train(dir, arg(3), arg(4), arg(5));
  return Fail("unknown mode " + mode);
}

}  // namespace
}  // namespace rckpt::testing

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rckpt::testing::g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &rckpt::testing::g_size);
  const int rc = rckpt::testing::Run(argc, argv);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
