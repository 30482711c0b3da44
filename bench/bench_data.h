// Generated checkpoint data for the throughput suite: a transformer-shaped
// mixed-precision training state (bf16 model weights, f32 master weights and
// Adam moments, 0-d step counters) with trained-like value distributions.
#ifndef RCKPT_BENCH_BENCH_DATA_H_
#define RCKPT_BENCH_BENCH_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/status.h"

namespace rckpt::bench {

// What kind of values a tensor holds; compression ratios are reported per kind.
enum class Kind { kWeightBf16, kWeightF32, kAdamM, kAdamV, kStep };
const char* KindName(Kind kind);

struct BenchTensor {
  std::string section;
  std::string name;
  Kind kind;
  Tensor tensor;
};

struct BenchData {
  std::vector<BenchTensor> tensors;
  uint64_t bytes = 0;
  int layers = 0;
  int width = 0;

  // A checkpoint borrowing the tensors (valid while this object lives).
  Result<Checkpoint> ToCheckpoint() const;
};

// Generates about `target_bytes` of data in `layers` transformer layers
// (0: 8). Deterministic for a given seed. Uses `threads` threads.
Result<BenchData> Generate(uint64_t target_bytes, int layers, uint64_t seed, int threads);

// Writes the tensors as a safetensors file (the peers' input): 8-byte
// header length, JSON header, then the tensors' bytes in order.
Status WriteSafetensors(const BenchData& data, const std::string& path);

}  // namespace rckpt::bench

#endif  // RCKPT_BENCH_BENCH_DATA_H_
