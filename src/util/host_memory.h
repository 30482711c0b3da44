// Host memory for tensor bytes.
//
// Blocks of at least kHugeBlockBytes get their own 2 MiB-aligned anonymous
// mapping. Up to kHugeBlockMaxBytes, transparent huge pages are requested
// (madvise; a no-op where THP is off): the first write of fresh memory then
// faults once per 2 MiB instead of once per 4 KiB, which on the virtual
// machines measured made loads into new memory 2-5x faster. Beyond that size
// the same machines hand out huge pages the balloon driver has returned to
// the host, and re-backing them cost more than 4 KiB faults (0.13 vs 0.44
// GB/s for 1 GiB), so larger blocks use plain pages (docs/PERFORMANCE.md).
// Smaller blocks come from the C heap.
#ifndef RCKPT_SRC_UTIL_HOST_MEMORY_H_
#define RCKPT_SRC_UTIL_HOST_MEMORY_H_

#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>

namespace rckpt {

inline constexpr uint64_t kHugeBlockBytes = 4ull << 20;
inline constexpr uint64_t kHugeBlockMaxBytes = 128ull << 20;

// `bytes` (rounded up to 64, at least 64) of 64-byte aligned host memory,
// zero-filled when `zero`; freed when the last owner goes. nullptr when the
// memory cannot be had.
std::shared_ptr<void> AllocateHostBlock(uint64_t bytes, bool zero);

// A reusable work buffer whose contents are never initialised: a
// std::vector would zero every byte it grows by, a second pass over memory
// that is about to be overwritten. Grows in place of the old block (contents
// are not kept). Not thread-safe.
class ScratchBuffer {
 public:
  // At least `bytes` bytes, 64-byte aligned. std::bad_alloc when the memory
  // cannot be had (the load pipeline reports it as OutOfMemory).
  std::span<std::byte> Get(uint64_t bytes);

 private:
  std::shared_ptr<void> block_;
  uint64_t size_ = 0;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_HOST_MEMORY_H_
