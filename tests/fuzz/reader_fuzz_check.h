// What every reader fuzz target asserts about an outcome: success, or one of
// the reader's documented codes with a non-empty one-line message.
#ifndef RCKPT_TESTS_FUZZ_READER_FUZZ_CHECK_H_
#define RCKPT_TESTS_FUZZ_READER_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "rckpt/status.h"

namespace rckpt::fuzz {

inline void Check(bool ok) {
  if (!ok) __builtin_trap();
}

inline void CheckOutcome(const Status& s,
                         std::initializer_list<StatusCode> allowed = {
                             StatusCode::kCorruption, StatusCode::kUnsupported}) {
  if (s.ok()) return;
  bool known = false;
  for (StatusCode c : allowed) known = known || c == s.code();
  Check(known);
  Check(!s.message().empty());
  Check(s.message().find('\n') == std::string::npos);
}

inline std::span<const std::byte> AsBytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

}  // namespace rckpt::fuzz

#endif  // RCKPT_TESTS_FUZZ_READER_FUZZ_CHECK_H_
