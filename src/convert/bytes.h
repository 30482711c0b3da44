// Little-endian byte helpers and overflow-checked arithmetic for the
// converters' parsers and writers.
#ifndef RCKPT_SRC_CONVERT_BYTES_H_
#define RCKPT_SRC_CONVERT_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace rckpt::convert {

inline uint64_t LoadLE(const std::byte* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint16_t Load16(const std::byte* p) { return static_cast<uint16_t>(LoadLE(p, 2)); }
inline uint32_t Load32(const std::byte* p) { return static_cast<uint32_t>(LoadLE(p, 4)); }
inline uint64_t Load64(const std::byte* p) { return LoadLE(p, 8); }

inline void AppendLE(std::string* out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// a + b and a * b, false on u64 overflow.
inline bool AddOk(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool MulOk(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

inline std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string_view AsChars(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Printable form of an untrusted name for error messages (control and
// non-ASCII bytes as \xNN, at most 80 bytes).
std::string Printable(std::string_view s);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_BYTES_H_
