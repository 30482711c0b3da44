// Mersenne Twister states made without CaptureEngine, for the tests, the
// golden files and the rng fuzz corpus: the legacy textual form earlier files
// hold, and reference-implementation states in the binary layout.
#ifndef RCKPT_TESTS_RNG_ENGINE_STATES_H_
#define RCKPT_TESTS_RNG_ENGINE_STATES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <locale>
#include <sstream>
#include <string>
#include <vector>

namespace rckpt::testing {

// The textual form std::mt19937(_64) records held before the binary layout:
// operator<< in the "C" locale (GNU libstdc++: the state words, then the
// position index).
template <typename Engine>
std::vector<std::byte> LegacyEngineText(const Engine& engine) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << engine;
  const std::string text = out.str();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return std::vector<std::byte>(p, p + text.size());
}

// The reference implementation's state after init_genrand(seed)
// (mt19937ar.c) or init_genrand64(seed) (mt19937-64.c), in the binary layout
// (schema/FORMAT.md 7.1): index n, so the next output twists. Word is
// uint32_t for mt19937, uint64_t for mt19937_64.
template <typename Word>
std::vector<std::byte> ReferenceEngineState(Word seed) {
  constexpr bool k64 = sizeof(Word) == 8;
  constexpr uint32_t n = k64 ? 312 : 624;
  std::vector<std::byte> s(2504);
  std::memcpy(s.data(), k64 ? "MT64" : "MT32", 4);
  std::memcpy(&s[4], &n, 4);
  Word mt = seed;
  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0) {
      mt = k64 ? static_cast<Word>(6364136223846793005ull * (mt ^ (mt >> 62)) +
                                   i)
               : static_cast<Word>(1812433253u * (mt ^ (mt >> 30)) + i);
    }
    std::memcpy(&s[8 + sizeof(Word) * i], &mt, sizeof(Word));
  }
  return s;
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_RNG_ENGINE_STATES_H_
