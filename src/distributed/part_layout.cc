#include "distributed/part_layout.h"

#include <algorithm>
#include <string>

namespace rckpt {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSmallestPartBytes = 8 * kMiB;

uint64_t RoundUp(uint64_t x, uint64_t a) {
  return a <= 1 ? x : (x + a - 1) / a * a;
}

uint64_t DivideUp(uint64_t x, uint64_t d) { return (x + d - 1) / d; }

// The parts the regions take with parts of `size` bytes.
uint64_t RegionParts(const std::vector<uint64_t>& lengths, uint64_t size) {
  uint64_t parts = 0;
  for (uint64_t n : lengths) parts += std::max<uint64_t>(1, DivideUp(n, size));
  return parts;
}

}  // namespace

Result<PartLayout> LayOutParts(const std::vector<uint64_t>& lengths,
                               uint64_t alignment, const SharedWrite& write) {
  const uint64_t ranks = lengths.size();
  if (write.max_parts <= ranks + kTailParts) {
    return Status::IoError(
        "a collective save of " + std::to_string(ranks) +
        " ranks to object storage needs a part per rank, and the upload "
        "takes at most " +
        std::to_string(write.max_parts) + " parts");
  }
  const uint64_t budget = write.max_parts - kTailParts;
  const uint64_t unit =
      std::max(kMiB, RoundUp(kMiB, std::max<uint64_t>(alignment, 1)));
  uint64_t total = 0;
  for (uint64_t n : lengths) total += n;
  // The smallest size in units that fits the budget: the parts counted
  // fall as the size grows, so a binary search between a size that may
  // not fit and one that does (each region at most one part more than
  // its share of total / size).
  const uint64_t floor_units = DivideUp(
      std::max({kSmallestPartBytes, write.min_part_bytes, uint64_t{1}}), unit);
  uint64_t lo = floor_units;
  uint64_t hi =
      std::max(lo, DivideUp(DivideUp(total, budget - ranks), unit) + 1);
  if (RegionParts(lengths, lo * unit) > budget) {
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (RegionParts(lengths, mid * unit) <= budget ? hi : lo) = mid;
    }
    lo = hi;
  }
  const uint64_t size = lo * unit;
  if (write.max_part_bytes != 0 && size > write.max_part_bytes) {
    return Status::IoError(
        "a collective save of " + std::to_string(total) +
        " bytes does not fit an upload of " + std::to_string(write.max_parts) +
        " parts of at most " + std::to_string(write.max_part_bytes) + " bytes");
  }
  PartLayout layout;
  layout.part_bytes = size;
  uint64_t next = 1;
  for (uint64_t n : lengths) {
    RankParts& r = layout.ranks.emplace_back();
    const uint64_t count = std::max<uint64_t>(1, DivideUp(n, size));
    r.start = layout.data_end;
    r.extent = count * size;
    r.first_part = next;
    r.part_bytes.assign(count, size);
    layout.data_end += r.extent;
    next += count;
  }
  layout.last_part = next;
  return layout;
}

std::vector<uint64_t> TailPartBytes(const PartLayout& layout, uint64_t bytes) {
  std::vector<uint64_t> sizes(bytes / layout.part_bytes, layout.part_bytes);
  if (bytes % layout.part_bytes != 0)
    sizes.push_back(bytes % layout.part_bytes);
  return sizes;
}

}  // namespace rckpt
