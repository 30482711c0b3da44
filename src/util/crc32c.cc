#include "util/crc32c.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "util/crc_slice8.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define RCKPT_CRC32C_SSE42 1
#endif

namespace rckpt {
namespace {

// Advances the register over `n` bytes, eight at a time (slicing-by-8).
uint32_t Slice8(const uint8_t* p, size_t n, uint32_t state) {
  return CrcSlice8<0x82f63b78u>::Advance(p, n, state);
}

#ifdef RCKPT_CRC32C_SSE42
const bool kCpuHasSse42 = __builtin_cpu_supports("sse4.2");

// The register advanced over `n` zero bytes, as a linear map on its 32
// bits: column i is the image of bit i. Used to join the three streams.
struct ZeroShift {
  std::array<uint32_t, 32> column{};
  uint32_t Apply(uint32_t v) const {
    uint32_t out = 0;
    for (int i = 0; v != 0; ++i, v >>= 1) {
      if (v & 1) out ^= column[i];
    }
    return out;
  }
};

ZeroShift MakeZeroShift(size_t n) {
  static constexpr std::byte kZeros[4096] = {};
  ZeroShift z;
  for (int i = 0; i < 32; ++i) {
    uint32_t state = 1u << i;
    for (size_t left = n; left > 0;) {
      const size_t step = std::min(left, sizeof kZeros);
      state = Slice8(reinterpret_cast<const uint8_t*>(kZeros), step, state);
      left -= step;
    }
    z.column[i] = state;
  }
  return z;
}

// Three independent streams hide the instruction's latency (3 cycles, one
// issued per cycle): stream blocks of kStride bytes, joined by ZeroShift.
constexpr size_t kStride = 8 * 1024;

__attribute__((target("sse4.2"))) uint32_t Sse42(const uint8_t* p, size_t n,
                                                 uint32_t state) {
  static const ZeroShift kShift = MakeZeroShift(kStride);
  uint64_t a = state;
  while (n >= 3 * kStride) {
    uint64_t b = 0, c = 0;
    for (size_t i = 0; i < kStride; i += 8) {
      uint64_t x, y, z;
      std::memcpy(&x, p + i, 8);
      std::memcpy(&y, p + kStride + i, 8);
      std::memcpy(&z, p + 2 * kStride + i, 8);
      a = _mm_crc32_u64(a, x);
      b = _mm_crc32_u64(b, y);
      c = _mm_crc32_u64(c, z);
    }
    // crc(A B) = shift(crc(A), |B|) ^ crc0(B), crc0 starting from zero.
    a = kShift.Apply(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b);
    a = kShift.Apply(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(c);
    p += 3 * kStride;
    n -= 3 * kStride;
  }
  while (n >= 8) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    a = _mm_crc32_u64(a, x);
    p += 8;
    n -= 8;
  }
  uint32_t s = static_cast<uint32_t>(a);
  while (n-- > 0) s = _mm_crc32_u8(s, *p++);
  return s;
}
#endif

}  // namespace

uint32_t Crc32cPortable(std::span<const std::byte> data, uint32_t crc) {
  return ~Slice8(reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                 ~crc);
}

uint32_t Crc32c(std::span<const std::byte> data, uint32_t crc) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
#ifdef RCKPT_CRC32C_SSE42
  if (kCpuHasSse42) return ~Sse42(p, data.size(), ~crc);
#endif
  return ~Slice8(p, data.size(), ~crc);
}

uint32_t CopyWithCrc32c(std::byte* dst, std::span<const std::byte> src,
                        uint32_t crc) {
  // Each block is checksummed from the cache the copy just filled.
  constexpr size_t kBlock = 3 * 8 * 1024 * 4;
  while (!src.empty()) {
    const size_t n = std::min(src.size(), kBlock);
    std::memcpy(dst, src.data(), n);
    crc = Crc32c(std::span<const std::byte>(dst, n), crc);
    dst += n;
    src = src.subspan(n);
  }
  return crc;
}

std::string Crc32cBase64(uint32_t crc) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  // 4 bytes: two groups of 3, the second padded with "==".
  const uint8_t b[4] = {
      static_cast<uint8_t>(crc >> 24), static_cast<uint8_t>(crc >> 16),
      static_cast<uint8_t>(crc >> 8), static_cast<uint8_t>(crc)};
  std::string out;
  out.push_back(kAlphabet[b[0] >> 2]);
  out.push_back(kAlphabet[((b[0] & 3) << 4) | (b[1] >> 4)]);
  out.push_back(kAlphabet[((b[1] & 15) << 2) | (b[2] >> 6)]);
  out.push_back(kAlphabet[b[2] & 63]);
  out.push_back(kAlphabet[b[3] >> 2]);
  out.push_back(kAlphabet[(b[3] & 3) << 4]);
  out += "==";
  return out;
}

}  // namespace rckpt
