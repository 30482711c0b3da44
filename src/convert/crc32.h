// CRC-32 (IEEE 802.3, reflected polynomial 0xedb88320), as zip archives use.
//
// Computed with carry-less multiplication (PCLMULQDQ, selected at run time
// on x86-64 CPUs that have it) over 64-byte blocks, and with slicing-by-8
// tables elsewhere and for the ends: about 20 times the speed of a
// byte-at-a-time table, so checking and writing the CRCs of a .pt archive
// costs little next to reading or writing its bytes.
#ifndef RCKPT_SRC_CONVERT_CRC32_H_
#define RCKPT_SRC_CONVERT_CRC32_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace rckpt::convert {

// The CRC-32 of `data`, continuing from `crc` (the CRC-32 of the bytes
// before it; 0 to start).
uint32_t Crc32(std::span<const std::byte> data, uint32_t crc = 0);

// The same with the portable tables only (tests compare the two).
uint32_t Crc32Portable(std::span<const std::byte> data, uint32_t crc = 0);

namespace internal {
// The folding kernel: advances the (non-inverted) CRC register `state` over
// `len` bytes at `p`. REQUIRES: len >= 64, len % 16 == 0, a CPU with
// PCLMULQDQ and SSE4.1.
uint32_t Crc32FoldPclmul(const uint8_t* p, size_t len, uint32_t state);
}  // namespace internal

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_CRC32_H_
