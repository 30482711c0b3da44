#include "util/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace rckpt {
namespace {

constexpr uintptr_t kHugePage = 2ull << 20;

// Maps len + 2 MiB and trims it to a 2 MiB-aligned start, so every whole
// 2 MiB of the block can be a huge page. Kernel memory is zero-filled.
std::shared_ptr<void> MapAligned(size_t len) {
  void* raw = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = begin + len + kHugePage;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  if (end > aligned + len) ::munmap(reinterpret_cast<void*>(aligned + len), end - aligned - len);
  void* p = reinterpret_cast<void*>(aligned);
  (void)::madvise(p, len, MADV_HUGEPAGE);  // advisory
  return std::shared_ptr<void>(p, [len](void* q) { ::munmap(q, len); });
}

}  // namespace

std::shared_ptr<void> AllocateHostBlock(uint64_t bytes, bool zero) {
  if (bytes > std::numeric_limits<size_t>::max() - 2 * kHugePage) return nullptr;
  size_t size = static_cast<size_t>((bytes + 63) & ~uint64_t{63});
  if (size == 0) size = 64;
  if (size >= kHugeBlockBytes) {
    return MapAligned((size + 4095) & ~size_t{4095});
  }
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) return nullptr;
  if (zero) std::memset(p, 0, size);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

bool ScratchBuffer::Reserve(uint64_t bytes) {
  if (bytes <= capacity_ && block_ != nullptr) return true;
  if (bytes >= (1ull << 20)) {
    bytes = (bytes + kHugeBlockBytes - 1) / kHugeBlockBytes * kHugeBlockBytes;
  }
  block_.reset();  // the old block goes first: never both at once
  capacity_ = 0;
  block_ = AllocateHostBlock(bytes, /*zero=*/false);
  if (block_ == nullptr) return false;
  capacity_ = bytes;
  return true;
}

std::span<std::byte> ScratchBuffer::Get(uint64_t bytes) {
  if (!Reserve(bytes)) throw std::bad_alloc();
  return {data(), static_cast<size_t>(bytes)};
}

}  // namespace rckpt
