// rckpt-mpi-bench: aggregate bandwidth of collective saves and resharded
// loads (docs/DISTRIBUTED.md, docs/PERFORMANCE.md), against this machine's
// single-process write+fsync and pread limits measured in the same run.
//
//   mpirun -np N rckpt-mpi-bench DIR MIB [--save-only] [--zstd]
//
// Each of the N ranks holds 1/N of the rows of one f32 tensor of MIB MiB
// (incompressible bytes, codec none unless --zstd). The run saves
// DIR/ck-N.rckpt, loads it back with the same sharding, and loads
// DIR/ck-4.rckpt (left by a 4-rank run, when present) split into N row
// blocks: a resharded load for N != 4. Rank 0 prints one line per row;
// medians of 3. Every run also reports each rank's peak resident memory
// during the saves above what it held before them (its shard): what a save
// costs in memory. --save-only stops after the saves.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "bench_limits.h"
#include "core/shard_geometry.h"
#include "rckpt/mpi.h"

namespace rckpt::bench {
namespace {

constexpr int64_t kCols = 4096;  // f32: 16 KiB rows

int rank = 0, size = 1;

// This process's peak resident set (VmHWM) in bytes; ResetPeakRss makes it
// start again from the current resident set (Linux 4.0+).
uint64_t PeakRss() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      uint64_t kib = 0;
      status >> kib;
      return kib << 10;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}
void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

Block RowsOf(int64_t rows, int part, int parts) {
  const int64_t base = rows / parts, extra = rows % parts;
  Block b{{part * base + std::min<int64_t>(part, extra), 0}, {base + (part < extra ? 1 : 0), kCols}};
  return b;
}

// Seconds of `run` on the slowest rank, all ranks starting together.
double Collective(const std::function<void()>& run) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = Now();
  run();
  MPI_Barrier(MPI_COMM_WORLD);
  double t = Now() - t0, worst = 0;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

void DropCache(const std::string& path) {
  if (rank == 0) DropFromCache(path);
  MPI_Barrier(MPI_COMM_WORLD);
}

struct LoadResult {
  double seconds = 0;
  uint64_t read = 0, needed = 0;  // the rank with the highest ratio
};

LoadResult TimedLoad(const std::string& path, int64_t rows) {
  LoadResult out;
  std::vector<double> times;
  for (int rep = 0; rep < 3; ++rep) {
    DropCache(path);
    std::optional<Result<RankLoad>> loaded;
    times.push_back(Collective([&] {
      const Block b = RowsOf(rows, rank, size);
      loaded = LoadDistributed(MPI_COMM_WORLD, path, {BlockRequest{"w", b.offsets, b.sizes}});
    }));
    Result<RankLoad>& r = *loaded;
    if (!r.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, r.status().ToString().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double ratio = double(r->bytes_read) / double(std::max<uint64_t>(r->bytes_needed, 1));
    struct { double v; int r; } mine{ratio, rank}, worst{};
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    uint64_t pair[2] = {r->bytes_read, r->bytes_needed};
    MPI_Bcast(pair, 2, MPI_UINT64_T, worst.r, MPI_COMM_WORLD);
    out.read = pair[0];
    out.needed = pair[1];
  }
  std::sort(times.begin(), times.end());
  out.seconds = times[1];
  return out;
}

int Run(const std::string& dir, uint64_t mib, bool save_only, bool zstd) {
  const int64_t rows = static_cast<int64_t>((mib << 20) / (kCols * 4));
  const double gib = double(rows) * kCols * 4 / double(1ull << 30);
  const Block mine = RowsOf(rows, rank, size);
  Tensor block = *Tensor::Empty(DType::kF32, mine.sizes);
  std::mt19937_64 rng(rank + 1);
  for (auto& x : block.host_span<uint32_t>()) x = static_cast<uint32_t>(rng());
  RankState state;
  state.shards.push_back(ShardPart{"model", "w", {rows, kCols}, mine.offsets, block, {}, {}});
  const std::string path = dir + "/ck-" + std::to_string(size) + ".rckpt";

  // The single-process limit: the same bytes written and synced by one
  // process (rank 0 alone, the others wait).
  double limit = 0;
  if (rank == 0) {
    Tensor all = *Tensor::Empty(DType::kF32, {rows, kCols});
    std::vector<std::span<const std::byte>> spans = {all.host_bytes()};
    std::fill(all.mutable_host_bytes().begin(), all.mutable_host_bytes().end(), std::byte{1});
    limit = Median(0, 3, [&] { return WriteFsyncSeconds(dir + "/limit.bin", spans); });
    std::filesystem::remove(dir + "/limit.bin");
  }
  std::vector<double> saves;
  SaveOptions options;
  if (zstd) options.codec = Codec::kZstd;
  ResetPeakRss();
  const uint64_t rss_before = PeakRss();
  for (int rep = 0; rep < 3; ++rep) {
    saves.push_back(Collective([&] {
      Status s = SaveDistributed(MPI_COMM_WORLD, path, state, options);
      if (!s.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }));
  }
  std::sort(saves.begin(), saves.end());
  const uint64_t save_extra = PeakRss() - std::min(PeakRss(), rss_before);
  std::vector<uint64_t> extras(size);
  MPI_Gather(&save_extra, 1, MPI_UINT64_T, extras.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("ranks %d  data %.2f GiB  shard %.0f MiB per rank  codec %s\n", size, gib,
                double(block.nbytes()) / double(1 << 20), zstd ? "zstd" : "none");
    std::printf("  save      %6.2f GiB/s  (single-process write+fsync limit %.2f GiB/s: %.2fx)\n",
                gib / saves[1], gib / limit, limit / saves[1]);
    std::printf("  save peak RSS above the shard, per rank (MiB):");
    for (uint64_t e : extras) std::printf(" %.0f", double(e) / double(1 << 20));
    std::printf("\n");
  }
  if (save_only) return 0;
  // The read limit: the file's bytes by pread on all cores of one process.
  double pread_limit = 0;
  if (rank == 0) {
    DropFromCache(path);
    pread_limit = PreadSeconds(path, 0, std::filesystem::file_size(path), 4, 4 << 20);
  }
  const LoadResult same = TimedLoad(path, rows);
  LoadResult reshard;
  const std::string four = dir + "/ck-4.rckpt";
  const bool have_four = std::filesystem::exists(four);
  if (have_four) reshard = TimedLoad(four, rows);
  if (rank == 0) {
    std::printf("  load same sharding  %6.2f GiB/s  (pread limit %.2f GiB/s)  read/needed %.3f\n",
                gib / same.seconds, gib / pread_limit, double(same.read) / double(same.needed));
    if (have_four) {
      std::printf("  load of the 4-rank file split %d ways  %6.2f GiB/s  (%.2fx same sharding)  "
                  "read/needed %.3f (%llu of %llu bytes)\n",
                  size, gib / reshard.seconds, same.seconds / reshard.seconds,
                  double(reshard.read) / double(reshard.needed),
                  static_cast<unsigned long long>(reshard.read),
                  static_cast<unsigned long long>(reshard.needed));
    }
  }
  return 0;
}

}  // namespace
}  // namespace rckpt::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rckpt::bench::rank);
  MPI_Comm_size(MPI_COMM_WORLD, &rckpt::bench::size);
  bool save_only = false, zstd = false, bad = argc < 3;
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--save-only") {
      save_only = true;
    } else if (flag == "--zstd") {
      zstd = true;
    } else {
      bad = true;
    }
  }
  if (bad) {
    if (rckpt::bench::rank == 0) {
      std::fprintf(stderr, "usage: rckpt-mpi-bench DIR MIB [--save-only] [--zstd]\n");
    }
    MPI_Finalize();
    return 2;
  }
  const int rc = rckpt::bench::Run(argv[1], std::stoull(argv[2]), save_only, zstd);
  MPI_Finalize();
  return rc;
}
