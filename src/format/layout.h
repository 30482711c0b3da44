// The fixed-size header and footer of a .rckpt file (schema/FORMAT.md).
#ifndef RCKPT_SRC_FORMAT_LAYOUT_H_
#define RCKPT_SRC_FORMAT_LAYOUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rckpt/status.h"

namespace rckpt {

inline constexpr uint32_t kFormatMajor = 1;
// The newest minor version this library reads, and the one it writes for a
// file holding a sharded tensor; files without one are written as 1.0, so
// 1.0 readers keep reading them.
inline constexpr uint32_t kFormatMinor = 1;
inline constexpr uint32_t kFormatMinorSharded = 1;
inline constexpr uint32_t kFormatMinorUnsharded = 0;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kFooterSize = 64;
// The first byte is non-ASCII and "\r\n" follows, as in PNG, so text-mode
// transfers and 7-bit channels are detected.
inline constexpr std::array<uint8_t, 8> kHeaderMagic = {0x89, 'R', 'C', 'K', 'P', 'T', '\r', '\n'};
inline constexpr std::array<uint8_t, 8> kFooterMagic = {'R', 'C', 'K', 'P', 'T', 'E', 'N', 'D'};
inline constexpr uint32_t kMinAlignment = 64;
inline constexpr uint32_t kMaxAlignment = 1u << 30;

struct Header {
  uint16_t version_major = kFormatMajor;
  uint16_t version_minor = kFormatMinorUnsharded;
  uint32_t flags = 0;
  uint32_t alignment = 4096;
};

struct Footer {
  uint64_t manifest_offset = 0;
  uint64_t manifest_size = 0;
  uint64_t manifest_checksum = 0;
  uint64_t file_size = 0;
  uint64_t data_end = 0;
  uint16_t version_major = kFormatMajor;
  uint16_t version_minor = kFormatMinorUnsharded;
  uint32_t flags = 0;
};

std::array<std::byte, kHeaderSize> EncodeHeader(const Header& h);
std::array<std::byte, kFooterSize> EncodeFooter(const Footer& f);

// Decoders check magic, checksum and version (Unsupported for a newer major
// version) and return Corruption naming the field otherwise.
Result<Header> DecodeHeader(std::span<const std::byte> bytes);
Result<Footer> DecodeFooter(std::span<const std::byte> bytes);

inline bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }
inline uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_LAYOUT_H_
