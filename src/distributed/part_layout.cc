#include "distributed/part_layout.h"

#include <algorithm>
#include <string>

namespace rckpt {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kCommonPartBytes = 8 * kMiB;

uint64_t RoundUp(uint64_t x, uint64_t a) {
  return a <= 1 ? x : (x + a - 1) / a * a;
}

}  // namespace

Result<PartLayout> LayOutParts(const std::vector<uint64_t>& lengths,
                               uint64_t alignment, const SharedWrite& write) {
  PartLayout layout;
  uint64_t total = 0;
  for (uint64_t n : lengths) {
    RankParts& r = layout.ranks.emplace_back();
    r.start = total;
    r.extent = RoundUp(std::max(n, write.min_part_bytes),
                       std::max<uint64_t>(alignment, 1));
    total += r.extent;
  }
  layout.data_end = total;
  // Room for every rank's parts and the last part, with a tenth to spare
  // for the regions' longer last parts.
  const uint64_t budget = write.max_parts > lengths.size() + 1
                              ? (write.max_parts - lengths.size() - 1) * 9 / 10
                              : 0;
  if (budget == 0) {
    return Status::IoError(
        "a collective save of " + std::to_string(lengths.size()) +
        " ranks to object storage needs a part per rank, and the upload "
        "takes at most " +
        std::to_string(write.max_parts) + " parts");
  }
  uint64_t common =
      std::max(kCommonPartBytes, RoundUp((total + budget - 1) / budget, kMiB));
  common = std::max(common, write.min_part_bytes);
  if (write.max_part_bytes != 0 && common > write.max_part_bytes / 2) {
    return Status::IoError(
        "a collective save of " + std::to_string(total) +
        " bytes does not fit an upload of " + std::to_string(write.max_parts) +
        " parts of at most " + std::to_string(write.max_part_bytes) + " bytes");
  }
  uint64_t next = 1;
  for (RankParts& r : layout.ranks) {
    r.first_part = next;
    const uint64_t count = std::max<uint64_t>(1, r.extent / common);
    r.part_bytes.assign(count - 1, common);
    r.part_bytes.push_back(r.extent - common * (count - 1));
    next += count;
  }
  layout.last_part = next;
  if (layout.last_part > write.max_parts) {
    return Status::IoError(
        "a collective save needs " + std::to_string(layout.last_part) +
        " parts; the upload takes at most " + std::to_string(write.max_parts));
  }
  return layout;
}

}  // namespace rckpt
