// Encoding of the state tree as a flat, breadth-first node array whose child
// ranges always point forward (schema/FORMAT.md, "State tree").
#ifndef RCKPT_SRC_FORMAT_TREE_CODEC_H_
#define RCKPT_SRC_FORMAT_TREE_CODEC_H_

#include <cstdint>
#include <span>
#include <vector>

#include "rckpt/status.h"
#include "rckpt/tree.h"

namespace rckpt {

inline constexpr uint32_t kMaxTreeDepth = 1000;

struct FlatNode {
  uint64_t first = 0;
  uint64_t str_off = 0;
  uint64_t str_len = 0;
  uint32_t count = 0;
  uint8_t kind = 0;
};

struct FlatTree {
  std::vector<FlatNode> nodes;
  std::vector<uint8_t> bytes;
};

// InvalidArgument when a container has more than 2^32-1 children or the tree
// is deeper than kMaxTreeDepth.
Result<FlatTree> EncodeTree(const Value& root);

// Validates in one linear pass (kinds, forward and contiguous child ranges,
// every node but the root has exactly one parent, payload ranges inside
// `bytes`, depth <= kMaxTreeDepth, map keys scalar or tuples) and rebuilds the
// Value. Corruption names the node index and the failed rule.
Result<Value> DecodeTree(std::span<const FlatNode> nodes, std::span<const uint8_t> bytes);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_TREE_CODEC_H_
