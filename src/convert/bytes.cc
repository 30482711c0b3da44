#include "convert/bytes.h"

#include "util/hex.h"

namespace rckpt::convert {

std::string Printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      AppendEscapedByte(out, c);
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

}  // namespace rckpt::convert
