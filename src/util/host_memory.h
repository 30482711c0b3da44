// Host memory for tensor bytes.
//
// Blocks of at least kHugeBlockBytes get their own 2 MiB-aligned anonymous
// mapping with transparent huge pages requested (madvise; a no-op where THP
// is off): the first write of fresh memory then faults once per 2 MiB
// instead of once per 4 KiB. On virtual machines those faults, not the copy,
// bound a load into new memory (docs/PERFORMANCE.md has the measurements).
// Smaller blocks come from the C heap.
#ifndef RCKPT_SRC_UTIL_HOST_MEMORY_H_
#define RCKPT_SRC_UTIL_HOST_MEMORY_H_

#include <cstdint>
#include <memory>

namespace rckpt {

inline constexpr uint64_t kHugeBlockBytes = 4ull << 20;

// `bytes` (rounded up to 64, at least 64) of 64-byte aligned host memory,
// zero-filled when `zero`; freed when the last owner goes. nullptr when the
// memory cannot be had.
std::shared_ptr<void> AllocateHostBlock(uint64_t bytes, bool zero);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_HOST_MEMORY_H_
