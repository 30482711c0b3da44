#include "convert/crc32.h"

#include "util/crc_slice8.h"

namespace rckpt::convert {
namespace {

// Advances the register over `n` bytes, eight at a time (slicing-by-8).
uint32_t Slice8(const uint8_t* p, size_t n, uint32_t state) {
  return CrcSlice8<0xedb88320u>::Advance(p, n, state);
}

#ifdef RCKPT_HAVE_CRC32_PCLMUL
const bool kCpuHasPclmul =
    __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif

}  // namespace

uint32_t Crc32Portable(std::span<const std::byte> data, uint32_t crc) {
  return ~Slice8(reinterpret_cast<const uint8_t*>(data.data()), data.size(), ~crc);
}

uint32_t Crc32(std::span<const std::byte> data, uint32_t crc) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t n = data.size();
  uint32_t state = ~crc;
#ifdef RCKPT_HAVE_CRC32_PCLMUL
  if (kCpuHasPclmul && n >= 256) {
    const size_t folded = n & ~size_t{15};
    state = internal::Crc32FoldPclmul(p, folded, state);
    p += folded;
    n -= folded;
  }
#endif
  return ~Slice8(p, n, state);
}

}  // namespace rckpt::convert
