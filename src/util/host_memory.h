// Host memory for tensor bytes.
//
// Blocks of at least kHugeBlockBytes get their own 2 MiB-aligned anonymous
// mapping with transparent huge pages requested (madvise; a no-op where THP
// is off): the first write of fresh memory then faults once per 2 MiB
// instead of once per 4 KiB. On the 2-core Intel VMs measured last, pread
// into fresh memory ran 1.8x faster with huge pages at 55 MiB to 1 GiB
// (7.3-7.8 against 4.2-4.7 GB/s, 3.8 against 2.1 at 1 GiB); an earlier,
// heavily loaded AMD VM had shown the opposite beyond 128 MiB
// (docs/PERFORMANCE.md, "Load into new memory"). Smaller blocks come from
// the C heap.
#ifndef RCKPT_SRC_UTIL_HOST_MEMORY_H_
#define RCKPT_SRC_UTIL_HOST_MEMORY_H_

#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>

namespace rckpt {

inline constexpr uint64_t kHugeBlockBytes = 4ull << 20;

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
