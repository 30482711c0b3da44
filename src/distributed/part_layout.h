// How a collective save to object storage lays the ranks out in one
// multipart upload: every rank's region is whole parts of its own, so the
// ranks upload in parallel without sending each other a byte.
#ifndef RCKPT_SRC_DISTRIBUTED_PART_LAYOUT_H_
#define RCKPT_SRC_DISTRIBUTED_PART_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

struct RankParts {
  uint64_t start =
      0;  // the region's first byte in the file (rank 0: 0, the header's)
  uint64_t extent = 0;  // its bytes, zero padding included
  uint64_t first_part = 0;
  std::vector<uint64_t> part_bytes;  // they add up to `extent`
};

struct PartLayout {
  std::vector<RankParts> ranks;
  uint64_t part_bytes = 0;  // every part's size but the very last one's
  uint64_t data_end = 0;    // the padded regions' end: the manifest follows
  uint64_t last_part = 0;   // the first of the tail's parts, uploaded by rank 0
};

// The parts the tail (manifest and footer) reserves at the end of the
// upload: a tail of up to this many parts always fits.
inline constexpr uint64_t kTailParts = 16;

// `lengths[r]`: rank r's bytes from the start of its region (rank 0's
// include the header). Every part but the very last has one size, as R2
// and Garage require: the smallest multiple of 1 MiB (and of `alignment`),
// at least 8 MiB and write.min_part_bytes, with which the regions, each
// padded with zeros to whole parts (one at least), and kTailParts fit
// write.max_parts. The size follows the job's total bytes (10,000 parts
// hold them all), never a rank's count of parts. IoError when the parts
// cannot fit the limits.
Result<PartLayout> LayOutParts(const std::vector<uint64_t>& lengths,
                               uint64_t alignment, const SharedWrite& write);

// The sizes of the parts that hold the tail's `bytes` after the regions:
// whole parts of layout.part_bytes, the last one the rest (no larger).
std::vector<uint64_t> TailPartBytes(const PartLayout& layout, uint64_t bytes);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_PART_LAYOUT_H_
