// UTF-8 well-formedness (RFC 3629): names in a checkpoint are UTF-8
// (schema/FORMAT.md), JSON text is UTF-8.
#ifndef RCKPT_SRC_UTIL_UTF8_H_
#define RCKPT_SRC_UTIL_UTF8_H_

#include <cstddef>
#include <string_view>

namespace rckpt {

// Length (1-4) of the well-formed UTF-8 sequence that starts at s[i], or 0
// when there is none there (a stray continuation byte, a truncated sequence,
// an overlong form, a surrogate, a code point past U+10FFFF).
size_t Utf8SequenceAt(std::string_view s, size_t i);

// True when all of `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_UTF8_H_
