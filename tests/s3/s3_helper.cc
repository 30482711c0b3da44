// A separate process for the S3 tests: saves a checkpoint of a known pattern
// (and can kill itself at a chosen moment of the save, as a crash would), or
// loads one into a buffer and checks every byte, then reports its peak
// memory. It reaches S3 as every rckpt program does: through
// DefaultFileSystem() and the AWS environment variables.
//
//   rckpt_s3_helper save URL MIB [--seed N] [--zstd] [--async]
//                   [--kill-at FRACTION]
//   rckpt_s3_helper load URL MIB [--seed N]
//
// The state is MIB MiB in 4 MiB tensors "model/w<i>" (the last one
// smaller). --kill-at F: SIGKILL this process once the save has written F of
// its bytes (0: at the first report; 1: after the last chunk, before the
// upload completes). Prints "peak_rss_kib=N" on success; exit 0 on success,
// 1 on a failed save or load (its error on stderr), 2 on a wrong byte.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rckpt/async_save.h"
#include "rckpt/io.h"

namespace {

constexpr uint64_t kTensorBytes = 4ull << 20;

uint64_t Word(uint64_t seed, uint64_t tensor, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + tensor * 0xbf58476d1ce4e5b9ull + index;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<uint64_t> Sizes(uint64_t total) {
  std::vector<uint64_t> out;
  for (uint64_t done = 0; done < total; done += kTensorBytes) {
    out.push_back(std::min(kTensorBytes, total - done));
  }
  return out;
}

// Tensor i's name, "w<i>", built by appending: GCC 12's -O3 warns (-Wrestrict,
// a false positive) on "w" + std::to_string(i).
std::string TensorName(size_t i) {
  std::string name(1, 'w');
  name += std::to_string(i);
  return name;
}

long PeakRssKib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int Save(const std::string& url, uint64_t bytes, uint64_t seed, bool zstd, bool async,
         double kill_at) {
  rckpt::Checkpoint ck;
  std::vector<uint64_t> sizes = Sizes(bytes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    rckpt::Result<rckpt::Tensor> made =
        rckpt::Tensor::Empty(rckpt::DType::kU8, {static_cast<int64_t>(sizes[i])});
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    rckpt::Tensor t = std::move(*made);
    auto* w = static_cast<uint64_t*>(t.data());
    for (uint64_t k = 0; k < sizes[i] / 8; ++k) w[k] = Word(seed, i, k);
    if (rckpt::Status s = ck.AddTensor("model", TensorName(i), std::move(t));
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  ck.Tree()["seed"] = static_cast<int64_t>(seed);
  rckpt::SaveOptions o;
  if (zstd) o.codec = rckpt::Codec::kZstd;
  if (kill_at >= 0) {
    o.progress = [kill_at](uint64_t done, uint64_t total) {
      if (static_cast<double>(done) >= kill_at * static_cast<double>(total)) ::raise(SIGKILL);
      return true;
    };
  }
  rckpt::Status s;
  if (async) {
    rckpt::AsyncSaver saver;
    s = saver.Save(url, ck, o);
    if (s.ok()) s = saver.Wait();
  } else {
    s = rckpt::Save(url, ck, o);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("peak_rss_kib=%ld\n", PeakRssKib());
  return 0;
}

int Load(const std::string& url, uint64_t bytes, uint64_t seed) {
  std::vector<uint64_t> sizes = Sizes(bytes);
  // The destination, allocated and touched before the load: what the load
  // adds to it is its own memory.
  std::vector<std::vector<uint64_t>> dst(sizes.size());
  std::vector<rckpt::LoadTarget> targets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    dst[i].assign(sizes[i] / 8, 0);
    targets.push_back(rckpt::LoadTarget{TensorName(i),
                                        dst[i].data(),
                                        rckpt::DType::kU8,
                                        {static_cast<int64_t>(sizes[i])},
                                        rckpt::Device::Cpu()});
  }
  const long before = PeakRssKib();
  rckpt::Status s = rckpt::LoadInto(url, targets);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (uint64_t k = 0; k < sizes[i] / 8; ++k) {
      if (dst[i][k] != Word(seed, i, k)) {
        std::fprintf(stderr, "tensor w%zu: word %llu differs\n", i,
                     static_cast<unsigned long long>(k));
        return 2;
      }
    }
  }
  std::printf("destination_rss_kib=%ld\npeak_rss_kib=%ld\n", before, PeakRssKib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s save|load URL MIB [options]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const std::string url = argv[2];
  const uint64_t bytes = std::strtoull(argv[3], nullptr, 10) << 20;
  uint64_t seed = 1;
  bool zstd = false, async = false;
  double kill_at = -1;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--zstd") {
      zstd = true;
    } else if (a == "--async") {
      async = true;
    } else if (a == "--kill-at" && i + 1 < argc) {
      kill_at = std::strtod(argv[++i], nullptr);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (mode == "save") return Save(url, bytes, seed, zstd, async, kill_at);
  if (mode == "load") return Load(url, bytes, seed);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
