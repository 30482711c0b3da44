// rckpt-save-driver: times rckpt::Save alone, for profiling the save engine
// (perf, valgrind --tool=callgrind) without the rest of the suite.
//
//   rckpt-save-driver [--size BYTES_MIB] [--codec none|zstd1|zstd1+shuffle|zstd3+shuffle]
//                     [--reps N] [--threads N] [--small N] [--dir DIR] [--limit]
//                     [--keep PATH] [--layers N]
//
// The default data is the suite's generated training state (bench_data.h).
// --layers N sets its layer count (more layers: more, smaller tensors).
// --small N saves N tensors of 256 f32 each instead: the per-tensor cost.
// --limit also times the suite's zstd limit (single-thread shuffle + compress
// of the same 4 MiB chunks, times threads) interleaved with the saves.
// --keep PATH leaves the last saved file at PATH (to compare bytes).
// Each result line also gives the process CPU seconds of a median save:
// CPU / wall is how many cores the save kept busy.
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_data.h"
#include "bench_limits.h"
#include "rckpt/io.h"
#include "util/thread_pool.h"

namespace rckpt::bench {
namespace {

int Main(int argc, char** argv) {
  uint64_t mib = 64;
  std::string codec = "zstd1+shuffle";
  int reps = 5;
  int threads = 0;
  int small = 0;
  int layers = 0;
  bool limit = false;
  std::string keep;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--size") mib = std::strtoull(v, nullptr, 10), ++i;
    else if (a == "--codec") codec = v, ++i;
    else if (a == "--reps") reps = std::atoi(v), ++i;
    else if (a == "--threads") threads = std::atoi(v), ++i;
    else if (a == "--small") small = std::atoi(v), ++i;
    else if (a == "--layers") layers = std::atoi(v), ++i;
    else if (a == "--dir") dir = v, ++i;
    else if (a == "--keep") keep = v, ++i;
    else if (a == "--limit") limit = true;
    else {
      std::fprintf(stderr, "rckpt-save-driver: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  // The suite's malloc policy: large blocks come fresh from the kernel.
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  threads = ResolveThreads(threads);
  SaveOptions o;
  o.threads = threads;
  o.shuffle = codec.find("shuffle") != std::string::npos ? Shuffle::kOn : Shuffle::kOff;
  if (codec != "none") {
    o.codec = Codec::kZstd;
    o.level = codec.rfind("zstd3", 0) == 0 ? 3 : 1;
  }
  BenchData data;
  Checkpoint ck;
  std::vector<float> small_values(256, 0.5f);
  uint64_t bytes = 0;
  if (small > 0) {
    for (int t = 0; t < small; ++t) {
      TensorView view{small_values.data(), DType::kF32, {256}, Device::Cpu()};
      std::string name(1, 't');
      name += std::to_string(t);
      if (Status s = ck.AddTensor("model", name, view); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      bytes += 1024;
    }
  } else {
    auto d = Generate(mib << 20, layers, 1, threads);
    if (!d.ok()) return 1;
    data = std::move(d).value();
    auto c = data.ToCheckpoint();
    if (!c.ok()) return 1;
    ck = std::move(c).value();
    bytes = data.bytes;
  }
  const std::string path = dir + "/save-driver-" + std::to_string(::getpid()) + ".rckpt";
  // CPU seconds of the whole process per save: busy cores = cpu / wall.
  auto cpu_now = [] {
    timespec ts;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  std::vector<double> cpu;
  std::vector<std::function<double()>> runs = {[&] {
    const double c0 = cpu_now();
    const double t0 = Now();
    if (Status s = Save(path, ck, o); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
    const double t = Now() - t0;
    cpu.push_back(cpu_now() - c0);
    return t;
  }};
  std::unique_ptr<CodecSample> sample;
  if (limit && o.codec == Codec::kZstd && small == 0) {
    std::vector<CodecChunk> chunks;
    for (const BenchTensor& t : data.tensors) {
      const auto b = t.tensor.host_bytes();
      const uint32_t elem =
          o.shuffle == Shuffle::kOn ? static_cast<uint32_t>(DTypeSize(t.tensor.dtype())) : 0;
      for (uint64_t off = 0; off < b.size(); off += 4ull << 20) {
        chunks.push_back({b.subspan(off, std::min<uint64_t>(4ull << 20, b.size() - off)), elem});
      }
    }
    sample = std::make_unique<CodecSample>(std::move(chunks), o.level);
    runs.push_back([&] { return sample->CompressSeconds(); });
  }
  const std::vector<double> m = Interleaved(1, reps, runs);
  const double file = static_cast<double>(std::filesystem::file_size(path));
  if (keep.empty()) {
    std::filesystem::remove(path);
  } else {
    std::filesystem::rename(path, keep);
  }
  std::printf("save %s: %zu tensors, %.1f MiB -> %.1f MiB, %.4f s, %.3f GB/s",
              codec.c_str(), ck.tensors().size(), bytes / 1048576.0, file / 1048576.0, m[0],
              bytes / m[0] / 1e9);
  std::sort(cpu.begin(), cpu.end());
  std::printf(", cpu %.4f s", cpu[cpu.size() / 2]);
  if (small > 0) std::printf(", %.2f us per tensor", m[0] / small * 1e6);
  if (m.size() > 1) {
    const double lim = threads * sample->raw_bytes() / m[1];
    std::printf(", limit %d x compress %.3f GB/s, ratio %.2f", threads, lim / 1e9,
                bytes / m[0] / lim);
  }
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace rckpt::bench

int main(int argc, char** argv) { return rckpt::bench::Main(argc, argv); }
