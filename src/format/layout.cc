#include "format/layout.h"

#include <cstring>
#include <string>

#include "codec/codec.h"
#include "util/hex.h"

namespace rckpt {
namespace {

void Put16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }
void Put32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
void Put64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint16_t Get16(const std::byte* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
uint32_t Get32(const std::byte* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t Get64(const std::byte* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

Status CheckVersion(const char* where, uint16_t major, uint16_t minor) {
  if (major > kFormatMajor) {
    return Status::Unsupported(std::string(where) + ": format version " +
                               std::to_string(major) + "." + std::to_string(minor) +
                               " is newer than this reader (" +
                               std::to_string(kFormatMajor) + "." +
                               std::to_string(kFormatMinor) + "); upgrade rckpt");
  }
  if (major == 0) {
    return Status::Corruption(std::string(where) + ": format version 0 is not valid");
  }
  return Status::Ok();
}

}  // namespace

// Header: magic[8] major:u16 minor:u16 flags:u32 alignment:u32
// header_size:u32 reserved[32] checksum:u64 (XXH3 of bytes 0..55).
std::array<std::byte, kHeaderSize> EncodeHeader(const Header& h) {
  std::array<std::byte, kHeaderSize> b{};
  std::memcpy(b.data(), kHeaderMagic.data(), 8);
  Put16(&b[8], h.version_major);
  Put16(&b[10], h.version_minor);
  Put32(&b[12], h.flags);
  Put32(&b[16], h.alignment);
  Put32(&b[20], kHeaderSize);
  Put64(&b[56], Checksum(std::span<const std::byte>(b.data(), 56)));
  return b;
}

Result<Header> DecodeHeader(std::span<const std::byte> b) {
  if (b.size() < kHeaderSize) {
    return Status::Corruption("header: file has " + std::to_string(b.size()) +
                              " bytes, a header needs " + std::to_string(kHeaderSize));
  }
  if (std::memcmp(b.data(), kHeaderMagic.data(), 8) != 0) {
    return Status::Corruption("header: bad magic (not an rckpt file)");
  }
  uint64_t want = Get64(&b[56]);
  uint64_t got = Checksum(b.subspan(0, 56));
  if (want != got) {
    return Status::Corruption("header: checksum mismatch (stored " + Hex64(want) +
                              ", computed " + Hex64(got) + ")");
  }
  Header h;
  h.version_major = Get16(&b[8]);
  h.version_minor = Get16(&b[10]);
  h.flags = Get32(&b[12]);
  h.alignment = Get32(&b[16]);
  RCKPT_RETURN_IF_ERROR(CheckVersion("header", h.version_major, h.version_minor));
  if (Get32(&b[20]) != kHeaderSize) {
    return Status::Corruption("header: header_size is " + std::to_string(Get32(&b[20])) +
                              ", expected " + std::to_string(kHeaderSize));
  }
  if (!IsPowerOfTwo(h.alignment) || h.alignment < kMinAlignment || h.alignment > kMaxAlignment) {
    return Status::Corruption("header: alignment " + std::to_string(h.alignment) +
                              " is not a power of two in [64, 2^30]");
  }
  return h;
}

// Footer: manifest_offset:u64 manifest_size:u64 manifest_checksum:u64
// file_size:u64 data_end:u64 major:u16 minor:u16 flags:u32
// checksum:u64 (XXH3 of bytes 0..47) magic[8].
std::array<std::byte, kFooterSize> EncodeFooter(const Footer& f) {
  std::array<std::byte, kFooterSize> b{};
  Put64(&b[0], f.manifest_offset);
  Put64(&b[8], f.manifest_size);
  Put64(&b[16], f.manifest_checksum);
  Put64(&b[24], f.file_size);
  Put64(&b[32], f.data_end);
  Put16(&b[40], f.version_major);
  Put16(&b[42], f.version_minor);
  Put32(&b[44], f.flags);
  Put64(&b[48], Checksum(std::span<const std::byte>(b.data(), 48)));
  std::memcpy(&b[56], kFooterMagic.data(), 8);
  return b;
}

Result<Footer> DecodeFooter(std::span<const std::byte> b) {
  if (b.size() < kFooterSize) {
    return Status::Corruption("footer: need " + std::to_string(kFooterSize) + " bytes, have " +
                              std::to_string(b.size()));
  }
  if (std::memcmp(&b[56], kFooterMagic.data(), 8) != 0) {
    return Status::Corruption(
        "footer: bad magic at the end of the file (an incomplete write, or not an rckpt file)");
  }
  uint64_t want = Get64(&b[48]);
  uint64_t got = Checksum(b.subspan(0, 48));
  if (want != got) {
    return Status::Corruption("footer: checksum mismatch (stored " + Hex64(want) +
                              ", computed " + Hex64(got) + ")");
  }
  Footer f;
  f.manifest_offset = Get64(&b[0]);
  f.manifest_size = Get64(&b[8]);
  f.manifest_checksum = Get64(&b[16]);
  f.file_size = Get64(&b[24]);
  f.data_end = Get64(&b[32]);
  f.version_major = Get16(&b[40]);
  f.version_minor = Get16(&b[42]);
  f.flags = Get32(&b[44]);
  RCKPT_RETURN_IF_ERROR(CheckVersion("footer", f.version_major, f.version_minor));
  return f;
}

}  // namespace rckpt
