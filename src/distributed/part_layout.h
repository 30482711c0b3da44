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
  uint64_t data_end = 0;   // the padded regions' end: the manifest follows
  uint64_t last_part = 0;  // manifest and footer, uploaded by rank 0
};

// `lengths[r]`: rank r's bytes from the start of its region (rank 0's
// include the header). Each region is padded with zeros to at least
// write.min_part_bytes and to `alignment`, then cut into parts of a size
// common to all ranks (8 MiB, or larger so that every part fits in
// write.max_parts), a region's last part taking the remainder (at most
// twice the common size). IoError when the parts cannot fit S3's limits.
Result<PartLayout> LayOutParts(const std::vector<uint64_t>& lengths,
                               uint64_t alignment, const SharedWrite& write);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_PART_LAYOUT_H_
