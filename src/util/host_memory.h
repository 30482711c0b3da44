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
// std::vector zero-fills what it allocates, and large blocks come fresh from
// the kernel, so loads and saves paid a page fault and a memset per 4 KiB of
// their buffers. Grows by replacing its block (contents are not kept). From
// 1 MiB on, sizes are rounded up to whole huge-page blocks (one fault per
// 2 MiB touched), which halved the page faults of a 55 MiB save. Not
// thread-safe.
class ScratchBuffer {
 public:
  // Room for at least `bytes`; false when the memory cannot be had.
  [[nodiscard]] bool Reserve(uint64_t bytes);
  // The first `bytes` bytes, 64-byte aligned, after Reserve(bytes);
  // std::bad_alloc when the memory cannot be had.
  std::span<std::byte> Get(uint64_t bytes);
  std::byte* data() const { return static_cast<std::byte*>(block_.get()); }

 private:
  std::shared_ptr<void> block_;
  uint64_t capacity_ = 0;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_HOST_MEMORY_H_
