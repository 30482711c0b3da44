// Hexadecimal digits, the one encoder every layer uses: digests and
// checksums in messages and on the wire, escapes of bytes a message cannot
// show, the temporary names of writes.
#ifndef RCKPT_SRC_UTIL_HEX_H_
#define RCKPT_SRC_UTIL_HEX_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace rckpt {

enum class HexCase { kLower, kUpper };

// Appends the two hex digits of byte `c`, high nibble first.
void AppendHexByte(std::string& out, unsigned char c, HexCase hex_case = HexCase::kLower);

// Two lowercase hex digits per byte of `bytes`, in order ("00ff1a").
std::string HexEncode(std::span<const std::byte> bytes);
std::string HexEncode(std::string_view bytes);
std::string HexEncode(std::span<const unsigned char> bytes);

// The low `digits` nibbles of `v` (1 to 16), most significant first,
// lowercase, zero-padded: HexDigits(0xab, 4) == "00ab".
std::string HexDigits(uint64_t v, int digits);

// "0x" and the 16 digits of `v`: how messages print checksums.
std::string Hex64(uint64_t v);

// Appends "\xNN" (lowercase): how messages write a byte they cannot show.
void AppendEscapedByte(std::string& out, unsigned char c);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_HEX_H_
