// The state of a 4-rank data-parallel job with sharded optimizer state and
// tensor-parallel layers, built deterministically so that every rank, any
// later job and the single-process tests agree on it bit for bit.
#ifndef RCKPT_TESTS_DISTRIBUTED_MPI_STATE_H_
#define RCKPT_TESTS_DISTRIBUTED_MPI_STATE_H_

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/shard_geometry.h"
#include "rckpt/checkpoint.h"

namespace rckpt::testing {

inline constexpr int kSavedRanks = 4;

struct GlobalTensor {
  std::string section;
  std::string name;
  DType dtype;
  Shape shape;
  int split_dim;  // how the saving job shards it; -1: replicated
};

// Row-, column- and flat-sharded tensors, replicated ones, optimizer state.
inline std::vector<GlobalTensor> GlobalTensors() {
  return {
      {"model", "fc1.weight", DType::kF32, {96, 40}, 0},          // rows
      {"model", "fc2.weight", DType::kBF16, {40, 70}, 1},         // columns
      {"model", "embed.weight", DType::kF16, {33, 8}, -1},        // replicated
      {"optimizer", "flat.exp_avg", DType::kF32, {10007}, 0},     // flat, uneven
      {"optimizer", "flat.exp_avg_sq", DType::kF64, {10007}, 0},
      {"optimizer", "step", DType::kI64, {}, -1},                 // replicated 0-d
  };
}

inline Tensor GlobalValue(const GlobalTensor& g) {
  Tensor t = *Tensor::Empty(g.dtype, g.shape);
  std::mt19937_64 rng(std::hash<std::string>{}(g.name));
  auto bytes = t.mutable_host_bytes();
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return t;
}

// Part `p` of `parts` of dimension `dim` of `shape` (the first parts one
// larger when it does not divide).
inline Block PartOf(const Shape& shape, int dim, int p, int parts) {
  Block b = WholeBlock(shape);
  const int64_t n = shape[dim];
  const int64_t base = n / parts, extra = n % parts;
  b.offsets[dim] = p * base + std::min<int64_t>(p, extra);
  b.sizes[dim] = base + (p < extra ? 1 : 0);
  return b;
}

inline Tensor Slice(const Tensor& global, const Block& block) {
  Tensor out = *Tensor::Empty(global.dtype(), block.sizes);
  CopyRegion(block, WholeBlock(global.shape()), static_cast<const std::byte*>(global.data()), 0,
             block, static_cast<std::byte*>(out.data()), DTypeSize(global.dtype()));
  return out;
}

// Rank r's generator states and data-loader cursor.
inline std::vector<std::byte> RankRngBytes(int rank, int step) {
  std::vector<std::byte> b(16);
  uint64_t seed = 1000 + rank, offset = 4096ull * step + rank;
  std::memcpy(b.data(), &seed, 8);
  std::memcpy(b.data() + 8, &offset, 8);
  return b;
}

inline Value RankTree(int rank, int step) {
  Value v;
  v["data_cursor"] = 1000 * rank + 17 * step;
  return v;
}

inline Value CommonTree(int step) {
  Value v;
  v["epoch"] = step;
  v["scheduler"]["last_lr"] = 1e-3 / (1 + step);
  return v;
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_DISTRIBUTED_MPI_STATE_H_
