// The geometry of sharded tensors: blocks of a global shape, the checks that
// a tensor's shards tile it exactly, and the arithmetic the loaders use to
// cut a wanted block out of the saved ones. Plain values: the checkpoint (a
// sharded tensor's shards), the format (a file's shard table) and the engine
// (block reads) all use it.
#ifndef RCKPT_SRC_CORE_SHARD_GEOMETRY_H_
#define RCKPT_SRC_CORE_SHARD_GEOMETRY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rckpt/status.h"
#include "rckpt/tensor.h"

namespace rckpt {

// A box of a global shape: the elements [offsets[d], offsets[d] + sizes[d])
// of every dimension d.
struct Block {
  Shape offsets;
  Shape sizes;
};

// Corruption (naming `where`, the dimension and the numbers) unless the
// shard's offsets and sizes have the rank of `shape`, every size is >= 1 and
// every [offset, offset + size) lies inside [0, shape[d]). (Corruption: the
// file validator's code; a caller checking its own arguments turns it into
// InvalidArgument.)
Status CheckShardBlock(const std::string& where, const Shape& shape, const Block& shard);

// Corruption unless `shards` (each already CheckShardBlock'ed) cover every
// element of `shape` exactly once: names the two overlapping shards, or how
// many elements no shard covers.
Status CheckShardTiling(const std::string& where, const Shape& shape,
                        std::span<const Block* const> shards);

// InvalidArgument unless `block` has the rank of `shape`, non-negative
// offsets and sizes, and lies inside it.
Status CheckBlockInShape(const std::string& where, const Shape& shape, const Block& block);

// The common part of two blocks of one shape, or nullopt when they do not
// meet.
std::optional<Block> Intersect(const Block& a, const Block& b);

// The bytes [first, end) of `outer`'s row-major layout that hold every
// element of `inner` (a block inside `outer`): from its first to its last
// element, with whatever lies between.
struct ByteRange {
  uint64_t first = 0;
  uint64_t end = 0;
};
ByteRange SpanOf(const Block& outer, const Block& inner, size_t elem_size);

// Copies the elements of `region` (a block of the global shape, inside both
// `src_block` and `dst_block`) from `src` (row-major bytes of src_block,
// starting at byte `src_skip` of that layout) to `dst` (row-major bytes of
// dst_block).
void CopyRegion(const Block& region, const Block& src_block, const std::byte* src,
                uint64_t src_skip, const Block& dst_block, std::byte* dst, size_t elem_size);

// Whole-shape block of `shape`.
Block WholeBlock(const Shape& shape);

}  // namespace rckpt

#endif  // RCKPT_SRC_CORE_SHARD_GEOMETRY_H_
