// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum S3
// takes as x-amz-checksum-crc32c (RFC 3720's iSCSI CRC).
//
// Computed with the SSE4.2 CRC32 instruction, selected at run time on
// x86-64 CPUs that have it, three streams at once; with slicing-by-8 tables
// elsewhere. CopyWithCrc32c copies and checksums in blocks small enough to
// stay in the cache, so a buffer filled with it is read from memory once.
#ifndef RCKPT_SRC_UTIL_CRC32C_H_
#define RCKPT_SRC_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rckpt {

// The CRC-32C of `data`, continuing from `crc` (the CRC-32C of the bytes
// before it; 0 to start).
uint32_t Crc32c(std::span<const std::byte> data, uint32_t crc = 0);

// The same with the portable tables only (tests compare the two).
uint32_t Crc32cPortable(std::span<const std::byte> data, uint32_t crc = 0);

// Copies `src` to `dst` (at least src.size() bytes, not overlapping) and
// returns the CRC-32C of `src` continuing from `crc`.
uint32_t CopyWithCrc32c(std::byte* dst, std::span<const std::byte> src,
                        uint32_t crc);

// The form S3 sends a CRC-32C in: base64 of its 4 bytes, big-endian.
std::string Crc32cBase64(uint32_t crc);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_CRC32C_H_
