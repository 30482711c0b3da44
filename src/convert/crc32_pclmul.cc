// The CRC-32 folding kernel, built with -mpclmul -msse4.1 in a file of its
// own and called only where the CPU has both (crc32.cc). Four 128-bit
// accumulators fold 64 bytes per step; then one, 16 bytes per step; then a
// reduction to 64 and 32 bits and a Barrett reduction to the CRC register.
// The constants are x^n mod P(x) for the reflected polynomial 0xedb88320
// (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ").
#include <immintrin.h>

#include "convert/crc32.h"

namespace rckpt::convert::internal {
namespace {

inline __m128i Load(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// x folded forward by the distance `k` stands for, xor'ed with `next`.
inline __m128i Fold(__m128i x, __m128i k, __m128i next) {
  __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

}  // namespace

uint32_t Crc32FoldPclmul(const uint8_t* p, size_t len, uint32_t state) {
  const __m128i k1k2 = _mm_set_epi64x(0x00000001c6e41596, 0x0000000154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00000000ccaa009e, 0x00000001751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0000000163cd6124);
  const __m128i poly = _mm_set_epi64x(0x00000001f7011641, 0x00000001db710641);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);

  __m128i x1 = _mm_xor_si128(Load(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x2 = Load(p + 16), x3 = Load(p + 32), x4 = Load(p + 48);
  p += 64;
  len -= 64;
  while (len >= 64) {
    x1 = Fold(x1, k1k2, Load(p));
    x2 = Fold(x2, k1k2, Load(p + 16));
    x3 = Fold(x3, k1k2, Load(p + 32));
    x4 = Fold(x4, k1k2, Load(p + 48));
    p += 64;
    len -= 64;
  }
  x1 = Fold(x1, k3k4, x2);
  x1 = Fold(x1, k3k4, x3);
  x1 = Fold(x1, k3k4, x4);
  while (len >= 16) {
    x1 = Fold(x1, k3k4, Load(p));
    p += 16;
    len -= 16;
  }
  // 128 -> 64 bits (appending 32 zero bits), then 64 -> 32.
  __m128i t = _mm_clmulepi64_si128(k3k4, x1, 0x01);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 4), t);
  // Barrett reduction.
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

}  // namespace rckpt::convert::internal
