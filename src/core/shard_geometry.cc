#include "core/shard_geometry.h"

#include <algorithm>
#include <cstring>

namespace rckpt {
namespace {

std::string Interval(int64_t offset, int64_t size) {
  return '[' + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
         std::to_string(size) + ")";
}

bool Overlap(const Block& a, const Block& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) {
      return false;
    }
  }
  return true;
}

// Row-major element strides of a block.
std::vector<uint64_t> Strides(const Shape& sizes) {
  std::vector<uint64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * static_cast<uint64_t>(sizes[d]);
  return s;
}

// Element index, in `outer`'s row-major layout, of the global coordinate `x`.
uint64_t LinearIndex(const Block& outer, const std::vector<int64_t>& x,
                     const std::vector<uint64_t>& strides) {
  uint64_t i = 0;
  for (size_t d = 0; d < x.size(); ++d) {
    i += static_cast<uint64_t>(x[d] - outer.offsets[d]) * strides[d];
  }
  return i;
}

// Shapes here were checked already: their element counts fit u64.
uint64_t NumelOrZero(const Shape& shape) {
  Result<uint64_t> n = ShapeNumel(shape);
  return n.ok() ? *n : 0;
}

}  // namespace

Status CheckShardBlock(const std::string& where, const Shape& shape, const Block& shard) {
  if (shard.offsets.size() != shape.size() || shard.sizes.size() != shape.size()) {
    return Status::Corruption(where + ": offsets has " + std::to_string(shard.offsets.size()) +
                              " and sizes " + std::to_string(shard.sizes.size()) +
                              " dimensions, the tensor's shape " + ShapeToString(shape) + " has " +
                              std::to_string(shape.size()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t o = shard.offsets[d], n = shard.sizes[d];
    int64_t end = 0;
    if (n < 1) {
      return Status::Corruption(where + ": sizes[" + std::to_string(d) + "] is " +
                                std::to_string(n) + ", expected >= 1 (blocks are not empty)");
    }
    if (o < 0 || __builtin_add_overflow(o, n, &end) || end > shape[d]) {
      return Status::Corruption(where + ": block " + Interval(o, n) + " of dimension " +
                                std::to_string(d) + " is outside the global shape " +
                                ShapeToString(shape));
    }
  }
  return Status::Ok();
}

Status CheckShardTiling(const std::string& where, const Shape& shape,
                        std::span<const Block* const> shards) {
  // Inside the shape, the blocks tile it exactly when none overlaps another
  // and their element counts add up to the shape's.
  const uint64_t total = NumelOrZero(shape);
  uint64_t covered = 0;
  for (const Block* s : shards) {
    const uint64_t n = NumelOrZero(s->sizes);
    if (__builtin_add_overflow(covered, n, &covered)) covered = UINT64_MAX;
  }
  // Sweep along the dimension where the blocks' starts differ most (the
  // sharded one), so only blocks that meet there are compared: linear for
  // row, column and flat sharding.
  const size_t rank = shape.size();
  size_t sweep = 0, best = 0;
  for (size_t d = 0; d < rank; ++d) {
    std::vector<int64_t> starts;
    for (const Block* s : shards) starts.push_back(s->offsets[d]);
    std::sort(starts.begin(), starts.end());
    const size_t distinct = std::unique(starts.begin(), starts.end()) - starts.begin();
    if (distinct > best) best = distinct, sweep = d;
  }
  std::vector<size_t> order(shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (rank > 0) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return shards[a]->offsets[sweep] < shards[b]->offsets[sweep];
    });
  }
  std::vector<size_t> active;
  for (size_t i : order) {
    const Block& s = *shards[i];
    if (rank > 0) {
      std::erase_if(active, [&](size_t j) {
        return shards[j]->offsets[sweep] + shards[j]->sizes[sweep] <= s.offsets[sweep];
      });
    }
    for (size_t j : active) {
      if (Overlap(*shards[j], s)) {
        return Status::Corruption(where + ": shards " + std::to_string(std::min(i, j)) + " and " +
                                  std::to_string(std::max(i, j)) + " overlap");
      }
    }
    active.push_back(i);
  }
  if (covered != total) {
    return Status::Corruption(where + ": shards cover " + std::to_string(covered) + " of its " +
                              std::to_string(total) + " elements (a gap)");
  }
  return Status::Ok();
}

Status CheckBlockInShape(const std::string& where, const Shape& shape, const Block& block) {
  if (block.offsets.size() != shape.size() || block.sizes.size() != shape.size()) {
    return Status::InvalidArgument(where + ": block has " + std::to_string(block.offsets.size()) +
                                   " offsets and " + std::to_string(block.sizes.size()) +
                                   " sizes, the shape " + ShapeToString(shape) + " has " +
                                   std::to_string(shape.size()) + " dimensions");
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t end = 0;
    if (block.offsets[d] < 0 || block.sizes[d] < 0 ||
        __builtin_add_overflow(block.offsets[d], block.sizes[d], &end) || end > shape[d]) {
      return Status::InvalidArgument(where + ": block " +
                                     Interval(block.offsets[d], block.sizes[d]) +
                                     " of dimension " + std::to_string(d) +
                                     " is outside the shape " + ShapeToString(shape));
    }
  }
  return Status::Ok();
}

std::optional<Block> Intersect(const Block& a, const Block& b) {
  Block out;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

ByteRange SpanOf(const Block& outer, const Block& inner, size_t elem_size) {
  const std::vector<uint64_t> strides = Strides(outer.sizes);
  std::vector<int64_t> last(inner.offsets.size());
  for (size_t d = 0; d < last.size(); ++d) {
    if (inner.sizes[d] == 0) return {};
    last[d] = inner.offsets[d] + inner.sizes[d] - 1;
  }
  return {LinearIndex(outer, inner.offsets, strides) * elem_size,
          (LinearIndex(outer, last, strides) + 1) * elem_size};
}

void CopyRegion(const Block& region, const Block& src_block, const std::byte* src,
                uint64_t src_skip, const Block& dst_block, std::byte* dst, size_t elem_size) {
  const size_t rank = region.sizes.size();
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);  // a 0-d block: one element, src_skip is 0
    return;
  }
  for (int64_t n : region.sizes) {
    if (n == 0) return;
  }
  const std::vector<uint64_t> ss = Strides(src_block.sizes), ds = Strides(dst_block.sizes);
  const uint64_t run = static_cast<uint64_t>(region.sizes[rank - 1]) * elem_size;
  std::vector<int64_t> x = region.offsets;  // walks every row of the region
  while (true) {
    std::memcpy(dst + LinearIndex(dst_block, x, ds) * elem_size,
                src + (LinearIndex(src_block, x, ss) * elem_size - src_skip), run);
    // Next row: an odometer over every dimension but the last.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++x[d] < region.offsets[d] + region.sizes[d]) break;
      x[d] = region.offsets[d];
    }
  }
}

Block WholeBlock(const Shape& shape) { return Block{Shape(shape.size(), 0), shape}; }

}  // namespace rckpt
