// A reflected 32-bit CRC over bytes with slicing-by-8 tables, for any
// polynomial: CRC-32 (zip, convert/crc32.h) and CRC-32C (S3, crc32c.h)
// share it, each with its own fast path beside it.
#ifndef RCKPT_SRC_UTIL_CRC_SLICE8_H_
#define RCKPT_SRC_UTIL_CRC_SLICE8_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rckpt {

template <uint32_t kPolynomial>
class CrcSlice8 {
 public:
  // Advances the (non-inverted) register `state` over `n` bytes at `p`.
  static uint32_t Advance(const uint8_t* p, size_t n, uint32_t state) {
    const Tables& t = TablesOnce();
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

 private:
  using Tables = std::array<std::array<uint32_t, 256>, 8>;

  static const Tables& TablesOnce() {
    static const Tables t = Make();
    return t;
  }

  static Tables Make() {
    Tables t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? kPolynomial ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
    return t;
  }
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_CRC_SLICE8_H_
