// Fuzz target: RNG state validation and engine restore on hostile bytes.
// Input: [kind: u8 (mod kNumRngKinds)][state bytes]. Traps when:
//  - validation fails with a code other than Corruption;
//  - RestoreEngine disagrees with ValidateRngState, or changes the engine
//    when it fails;
//  - a restored engine's captured state does not validate, or does not
//    restore to an engine with the same sequence;
//  - a binary-layout state at index 0 does not capture back to its own bytes;
//  - a valid binary-layout state, written in the legacy textual form (its
//    words, then its index), is refused or restores another sequence: one
//    rule decides for both forms.
#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "rckpt/rng.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// n consecutive outputs fix every later one: equal for n, equal forever.
template <typename Engine>
bool SameSequence(Engine a, Engine b) {
  for (size_t i = 0; i < Engine::state_size; ++i) {
    if (a() != b()) return false;
  }
  return true;
}

// The words and index of a binary-layout state as libstdc++'s operator<<
// writes them.
template <typename Engine>
std::vector<std::byte> AsText(std::span<const std::byte> binary) {
  constexpr size_t kWordBytes = Engine::word_size / 8;
  auto le = [&](size_t offset, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(binary[offset + i]) << (8 * i);
    return v;
  };
  std::string text;
  for (size_t i = 0; i < Engine::state_size; ++i)
    text += std::to_string(le(8 + i * kWordBytes, kWordBytes)) + " ";
  text += std::to_string(le(4, 4));
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return std::vector<std::byte>(p, p + text.size());
}

template <typename Engine>
void CheckRestore(std::span<const std::byte> bytes, rckpt::RngKind kind,
                  bool valid) {
  Engine engine(12345);
  const Engine before = engine;
  const rckpt::Status s = rckpt::RestoreEngine(bytes, &engine);
  Check(s.ok() == valid);
  if (!s.ok()) {
    Check(engine == before);
    return;
  }
  const std::vector<std::byte> again = rckpt::CaptureEngine(engine);
  Check(rckpt::ValidateRngState(kind, again).ok());
  Engine copy;
  Check(rckpt::RestoreEngine(again, &copy).ok());
  Check(SameSequence(copy, engine));
  const bool binary_at_index_0 = bytes.size() >= 8 && bytes[0] == std::byte{'M'} &&
                                 bytes[4] == std::byte{0} && bytes[5] == std::byte{0} &&
                                 bytes[6] == std::byte{0} && bytes[7] == std::byte{0};
  if (binary_at_index_0) {
    Check(again.size() == bytes.size() &&
          std::equal(again.begin(), again.end(), bytes.begin()));
  }
  if (bytes[0] == std::byte{'M'}) {  // valid, so the binary layout
    const std::vector<std::byte> text = AsText<Engine>(bytes);
    Check(rckpt::ValidateRngState(kind, text).ok());
    Engine from_text;
    Check(rckpt::RestoreEngine(text, &from_text).ok());
    Check(SameSequence(from_text, engine));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto kind = static_cast<rckpt::RngKind>(data[0] % rckpt::kNumRngKinds);
  const std::span<const std::byte> bytes(
      reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  const rckpt::Status s = rckpt::ValidateRngState(kind, bytes);
  Check(s.ok() || s.code() == rckpt::StatusCode::kCorruption);
  if (kind == rckpt::RngKind::kMt19937) {
    CheckRestore<std::mt19937>(bytes, kind, s.ok());
  } else if (kind == rckpt::RngKind::kMt19937_64) {
    CheckRestore<std::mt19937_64>(bytes, kind, s.ok());
  }
  return 0;
}
