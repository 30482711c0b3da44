// Helpers shared by the reliability tests and their child-process driver:
// deterministic checkpoints, content digests and child processes.
#ifndef RCKPT_TESTS_RELIABILITY_RELIABILITY_UTIL_H_
#define RCKPT_TESTS_RELIABILITY_RELIABILITY_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/status.h"

namespace rckpt::reliability {

// A checkpoint of about `mib` MiB in 1 MiB tensors, its bytes, tree and
// metadata all derived from `seed`.
inline Checkpoint MakeCheckpoint(uint64_t seed, uint64_t mib) {
  Checkpoint ck;
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < mib; ++i) {
    std::vector<std::byte> bytes(1 << 20);
    auto* words = reinterpret_cast<uint64_t*>(bytes.data());
    for (size_t w = 0; w < bytes.size() / 8; ++w) words[w] = rng();
    Result<Tensor> t = Tensor::FromBytes(DType::kF32, {256, 1024}, bytes);
    if (!t.ok() || !ck.AddTensor("model", "layer" + std::to_string(i), *std::move(t)).ok()) {
      std::abort();
    }
  }
  ck.Tree()["seed"] = static_cast<int64_t>(seed);
  ck.Metadata()["seed"] = std::to_string(seed);
  return ck;
}

// FNV-1a over names, dtypes, shapes, bytes, RNG records, tree and metadata.
inline uint64_t Digest(const Checkpoint& ck) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  auto mix_str = [&](const std::string& s) { mix(s.data(), s.size() + 1); };
  for (const auto& t : ck.tensors()) {
    mix_str(t.name);
    mix_str(t.section);
    const auto dtype = static_cast<int>(t.tensor.dtype());
    mix(&dtype, sizeof dtype);
    for (int64_t d : t.tensor.shape()) mix(&d, sizeof d);
    auto bytes = t.tensor.host_bytes();
    mix(bytes.data(), bytes.size());
  }
  for (const auto& r : ck.rng()) {
    mix_str(r.name);
    mix(r.bytes.data(), r.bytes.size());
  }
  mix_str(ck.Tree().DebugString());
  for (const auto& [k, v] : ck.Metadata()) {
    mix_str(k);
    mix_str(v);
  }
  return h;
}

}  // namespace rckpt::reliability

#endif  // RCKPT_TESTS_RELIABILITY_RELIABILITY_UTIL_H_
