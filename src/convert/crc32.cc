#include "convert/crc32.h"

#include <array>
#include <bit>
#include <cstring>

namespace rckpt::convert {
namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

const Tables& CrcTables() {
  static const Tables t = MakeTables();
  return t;
}

// Advances the register over `n` bytes, eight at a time (slicing-by-8).
uint32_t Slice8(const uint8_t* p, size_t n, uint32_t state) {
  const Tables& t = CrcTables();
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= state;
    state = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
            t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
            t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) state = t[0][(state ^ *p++) & 0xff] ^ (state >> 8);
  return state;
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
