// Helpers for tests of sharded tensors: cutting blocks out of a global host
// tensor, and the usual shardings of one.
#ifndef RCKPT_TESTS_FORMAT_SHARD_TEST_UTIL_H_
#define RCKPT_TESTS_FORMAT_SHARD_TEST_UTIL_H_

#include <vector>

#include "core/shard_geometry.h"
#include "rckpt/checkpoint.h"

namespace rckpt::testing {

// A host copy of `block` of host tensor `global`.
inline Tensor SliceOf(const Tensor& global, const Block& block) {
  Tensor out = *Tensor::Empty(global.dtype(), block.sizes);
  CopyRegion(block, WholeBlock(global.shape()), static_cast<const std::byte*>(global.data()), 0,
             block, static_cast<std::byte*>(out.data()), DTypeSize(global.dtype()));
  return out;
}

// `parts` near-equal blocks of `shape` split along dimension `dim` (the
// first blocks one larger when it does not divide).
inline std::vector<Block> SplitAlong(const Shape& shape, size_t dim, int parts) {
  std::vector<Block> out;
  int64_t begin = 0;
  for (int p = 0; p < parts; ++p) {
    const int64_t n = shape[dim] / parts + (p < shape[dim] % parts ? 1 : 0);
    Block b = WholeBlock(shape);
    b.offsets[dim] = begin;
    b.sizes[dim] = n;
    begin += n;
    if (n > 0) out.push_back(b);
  }
  return out;
}

// The shards of `global` cut as `blocks`, shard i written by rank i.
inline std::vector<TensorShard> ShardsOf(const Tensor& global, const std::vector<Block>& blocks) {
  std::vector<TensorShard> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.push_back(TensorShard{static_cast<int32_t>(i), blocks[i].offsets,
                              SliceOf(global, blocks[i]), std::nullopt});
  }
  return out;
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_FORMAT_SHARD_TEST_UTIL_H_
