#include "util/hex.h"

namespace rckpt {
namespace {

constexpr char kLowerDigits[] = "0123456789abcdef";
constexpr char kUpperDigits[] = "0123456789ABCDEF";

}  // namespace

void AppendHexByte(std::string& out, unsigned char c, HexCase hex_case) {
  const char* digits = hex_case == HexCase::kUpper ? kUpperDigits : kLowerDigits;
  out.push_back(digits[c >> 4]);
  out.push_back(digits[c & 15]);
}

std::string HexEncode(std::span<const unsigned char> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) AppendHexByte(out, c);
  return out;
}

std::string HexEncode(std::span<const std::byte> bytes) {
  return HexEncode({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()});
}

std::string HexEncode(std::string_view bytes) {
  return HexEncode({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()});
}

std::string HexDigits(uint64_t v, int digits) {
  std::string out(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kLowerDigits[v & 15];
  return out;
}

std::string Hex64(uint64_t v) { return "0x" + HexDigits(v, 16); }

void AppendEscapedByte(std::string& out, unsigned char c) {
  out += "\\x";
  AppendHexByte(out, c);
}

}  // namespace rckpt
