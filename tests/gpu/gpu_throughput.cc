// A short throughput measurement of the load pipeline on this machine:
// saves a checkpoint of N MiB in each encoding to a file under a directory,
// then loads it to host and to cuda:0 and prints one table row per case.
//
//   rckpt_gpu_throughput [--mib N] [--dir DIR] [--emulate-devices N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "rckpt/checkpoint.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"

namespace {

using rckpt::Checkpoint;
using rckpt::Device;

// Weight-like f32 data: normally distributed, so zstd+shuffle has work to do.
Checkpoint MakeCheckpoint(uint64_t mib) {
  Checkpoint ck;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> d(0.0f, 0.02f);
  const int64_t per_tensor = 16 << 20;  // 16 MiB tensors
  uint64_t left = mib << 20;
  for (int i = 0; left > 0; ++i) {
    const int64_t bytes =
        static_cast<int64_t>(std::min<uint64_t>(left, per_tensor));
    auto t = rckpt::Tensor::Empty(rckpt::DType::kF32, {bytes / 4});
    if (!t.ok()) std::abort();
    for (float& x : t->host_span<float>()) x = d(rng);
    // Appended: GCC 12's -O3 warns (-Wrestrict) on "w" + a temporary.
    std::string name(1, 'w');
    name += std::to_string(i);
    rckpt::Status s = ck.AddTensor("model", name, *t);
    if (!s.ok()) std::abort();
    left -= bytes;
  }
  return ck;
}

void Row(const char* encoding, const char* target, const rckpt::Status& s,
         const rckpt::LoadStats& st, uint64_t file_bytes) {
  if (!s.ok()) {
    std::printf("| %-12s | %-7s | failed: %s\n", encoding, target,
                s.ToString().c_str());
    return;
  }
  std::printf("| %-12s | %-7s | %10.1f | %10.1f | %8.3f | %8.2f | %12.1f |\n",
              encoding, target, file_bytes / 1048576.0,
              st.bytes_restored / 1048576.0, st.seconds,
              st.seconds > 0 ? st.bytes_restored / st.seconds / 1e9 : 0.0,
              st.staging_high_water / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 1024;
  std::string dir = std::filesystem::temp_directory_path().string();
  int emulate = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib"))
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--emulate-devices"))
      emulate = std::atoi(argv[i + 1]);
  }
  std::unique_ptr<rckpt::DeviceRuntime> emulated;
  rckpt::DeviceRuntime* runtime = &rckpt::DefaultRuntime();
  if (emulate >= 0) {
    emulated = rckpt::NewEmulatedRuntime(emulate);
    runtime = emulated.get();
  }
  std::printf("runtime %s, %d CUDA device(s), checkpoint %llu MiB in %s\n\n",
              std::string(runtime->name()).c_str(), runtime->DeviceCount().value_or(0),
              static_cast<unsigned long long>(mib), dir.c_str());
  std::printf(
      "| encoding     | target  |  file MiB  |  raw MiB   |  seconds |   GB/s  "
      " | staging MiB  |\n");
  std::printf(
      "|--------------|---------|------------|------------|----------|---------"
      "-|--------------|\n");
  const Checkpoint ck = MakeCheckpoint(mib);
  struct Encoding {
    const char* name;
    rckpt::Codec codec;
    rckpt::Shuffle shuffle;
  };
  const Encoding encodings[] = {
      {"none", rckpt::Codec::kNone, rckpt::Shuffle::kOff},
      {"zstd", rckpt::Codec::kZstd, rckpt::Shuffle::kOff},
      {"zstd+shuffle", rckpt::Codec::kZstd, rckpt::Shuffle::kOn},
  };
  const std::string path = dir + "/rckpt-throughput.rckpt";
  for (const Encoding& e : encodings) {
    rckpt::SaveOptions so;
    so.codec = e.codec;
    so.shuffle = e.shuffle;
    rckpt::Status s = rckpt::Save(path, ck, so);
    if (!s.ok()) {
      std::printf("save failed: %s\n", s.ToString().c_str());
      return 1;
    }
    const uint64_t file_bytes = std::filesystem::file_size(path);
    for (int target = 0; target < 2; ++target) {
      if (target == 1 && runtime->DeviceCount().value_or(0) == 0) break;
      rckpt::LoadStats stats;
      rckpt::LoadOptions lo;
      lo.runtime = runtime;
      lo.stats = &stats;
      lo.model_device =
          rckpt::DeviceSpec::Of(target ? Device::Cuda(0) : Device::Cpu());
      auto loaded = rckpt::Load(path, lo);
      Row(e.name, target ? "cuda:0" : "cpu", loaded.status(), stats,
          file_bytes);
    }
  }
  std::filesystem::remove(path);
  return 0;
}
