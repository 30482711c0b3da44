#include "core/mt_state.h"

#include "core/rng_layout.h"

#include <array>
#include <cstdint>
#include <locale>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rckpt {
namespace {

// ---- The binary layout ----------------------------------------------------
//
// Only standard interfaces touch the engine, so the layout does not depend on
// how a standard library keeps or prints its state: capture reads the next n
// outputs and inverts the tempering, which gives the next n words (index 0);
// restore computes the block before the stored one by running the recurrence
// backwards, hands it to seed(Sseq&), which the standard defines to install
// exactly those words as the engine's state, and discards p outputs.

constexpr size_t kMagicBytes = kMtMagicBytes;
constexpr size_t kIndexOffset = kMtIndexOffset;
constexpr size_t kWordsOffset = kMtWordsOffset;

template <typename Engine>
struct Mt {
  using Word = typename Engine::result_type;  // may be wider than w bits
  static constexpr size_t kW = Engine::word_size;
  static constexpr size_t kN = Engine::state_size;
  static constexpr size_t kM = Engine::shift_size;
  static constexpr size_t kWordBytes = kW / 8;
  static constexpr size_t kSize = kWordsOffset + kN * kWordBytes;
  static_assert(kSize == kMtStateBytes);
  static constexpr Word kWordMask = ~Word{0} >> (8 * sizeof(Word) - kW);
  static constexpr Word kLowerMask = (Word{1} << Engine::mask_bits) - 1;
  static constexpr Word kUpperMask = kWordMask & ~kLowerMask;
  static constexpr std::string_view kMagic = kW == 64 ? "MT64" : "MT32";
  static constexpr RngKind kKind =
      kW == 64 ? RngKind::kMt19937_64 : RngKind::kMt19937;

  // T(y) = (y >> 1) ^ (y odd ? a : 0) inverts because a's top bit is set and
  // y >> 1's is clear: the top bit of T(y) is y's lowest bit.
  static_assert((Engine::xor_mask >> (kW - 1)) == 1);
  static_assert(kM >= 2 && kM < kN);

  static Word UntwistTo(Word t) {
    const Word low = (t >> (kW - 1)) & 1;
    const Word shifted = t ^ (low != 0 ? Word{Engine::xor_mask} : Word{0});
    return ((shifted << 1) | low) & kWordMask;
  }

  // x = y ^ ((y >> shift) & mask) (or << shift), solved for y a shift's
  // worth of bits at a time.
  static Word UndoRight(Word x, size_t shift, Word mask) {
    Word y = x;
    for (size_t done = 0; done < kW; done += shift)
      y = x ^ ((y >> shift) & mask);
    return y;
  }
  static Word UndoLeft(Word x, size_t shift, Word mask) {
    Word y = x;
    for (size_t done = 0; done < kW; done += shift) {
      y = (x ^ ((y << shift) & mask)) & kWordMask;
    }
    return y;
  }
  static Word Untemper(Word z) {
    z = UndoRight(z, Engine::tempering_l, kWordMask);
    z = UndoLeft(z, Engine::tempering_t, Engine::tempering_c);
    z = UndoLeft(z, Engine::tempering_s, Engine::tempering_b);
    return UndoRight(z, Engine::tempering_u, Engine::tempering_d);
  }

  // Feeds seed(Sseq&) the words of a state, k = w / 32 values per word, least
  // significant first, as [rand.eng.mers] reads them.
  struct WordsSeq {
    using result_type = uint_least32_t;
    const std::vector<Word>* words;
    template <typename It>
    void generate(It begin, It end) const {
      size_t i = 0;
      for (It it = begin; it != end; ++it, ++i) {
        const Word w = (*words)[i / (kW / 32)];
        *it = static_cast<result_type>((w >> (32 * (i % (kW / 32)))) &
                                       0xffffffffu);
      }
    }
  };

  static std::string Prefix() {
    return std::string(RngKindName(kKind)) + " RNG state: ";
  }

  struct Stored {
    uint32_t index = 0;
    std::vector<Word> words;
  };

  static Result<Stored> Decode(std::span<const std::byte> bytes) {
    if (bytes.size() >= kMagicBytes &&
        std::string_view(reinterpret_cast<const char*>(bytes.data()),
                         kMagicBytes) != kMagic) {
      std::string got;
      for (size_t i = 0; i < kMagicBytes; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        static constexpr char kHex[] = "0123456789abcdef";
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
          got += static_cast<char>(c);
        } else {
          got += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
        }
      }
      return Status::Corruption(
          Prefix() + "field 'magic' (4 bytes at offset 0): expected '" +
          std::string(kMagic) + "' (or the legacy textual state), got '" + got +
          "'");
    }
    if (bytes.size() != kSize) {
      return Status::Corruption(Prefix() + "size: expected " +
                                std::to_string(kSize) + " bytes, got " +
                                std::to_string(bytes.size()));
    }
    Stored s;
    s.index = static_cast<uint32_t>(Le(bytes, kIndexOffset, 4));
    if (s.index > kN) {
      return Status::Corruption(
          Prefix() + "field 'index' (u32 at offset 4): expected 0.." +
          std::to_string(kN) + ", got " + std::to_string(s.index));
    }
    s.words.resize(kN);
    for (size_t i = 0; i < kN; ++i) {
      s.words[i] = static_cast<Word>(
          Le(bytes, kWordsOffset + i * kWordBytes, kWordBytes));
    }
    return s;
  }

  static uint64_t Le(std::span<const std::byte> bytes, size_t offset,
                     size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(bytes[offset + i]) << (8 * i);
    return v;
  }

  // The n words before the stored block: the state seed() installs so that
  // the next twist makes the stored block. X_{k+n} = X_{k+m} ^
  // T(upper(X_k) | lower(X_{k+1})) run backwards from the block's last word;
  // each step gives the upper bits of one word and the lower bits of the
  // next. The lower bits of the first word never reach an output (zero).
  static Result<std::vector<Word>> PreviousBlock(const Stored& s) {
    std::vector<Word> block = s.words;  // X_{B+j}
    std::vector<Word> prev(kN, 0);      // X_{B-n+j}
    for (size_t step = 0; step < kN; ++step) {
      const size_t j = kN - 1 - step;
      const Word m_term = j + kM < kN ? prev[j + kM] : block[j + kM - kN];
      const Word y = UntwistTo(block[j] ^ m_term);
      prev[j] |= y & kUpperMask;
      if (j + 1 < kN) {
        prev[j + 1] |= y & kLowerMask;
        continue;
      }
      // y's lower bits are those word 0 must have for word n-1 to follow.
      // Once word 0 has been output (index > 0) its lower bits feed nothing
      // but word n-1, so they are taken from it; before, a stored word 0
      // that disagrees is a state no engine can reach.
      const Word expected_low = y & kLowerMask;
      if (s.index == 0 && (block[0] & kLowerMask) != expected_low) {
        return Status::Corruption(
            Prefix() + "word 0 (at offset 8): its low " +
            std::to_string(Engine::mask_bits) + " bits (" +
            std::to_string(block[0] & kLowerMask) +
            ") do not follow from words " + std::to_string(kN - 1) + " and " +
            std::to_string(kM - 1) + " (expected " +
            std::to_string(expected_low) +
            "); not a state the engine can reach");
      }
      block[0] = (block[0] & kUpperMask) | expected_low;
    }
    RCKPT_RETURN_IF_ERROR(CheckNotAllZero(prev));
    return prev;
  }

  // seed() would replace a state that is zero but for the oldest word's
  // lower bits (the standard's rule), so it cannot be restored.
  static Status CheckNotAllZero(const std::vector<Word>& state) {
    bool zero = (state[0] & kUpperMask) == 0;
    for (size_t i = 1; zero && i < kN; ++i) zero = state[i] == 0;
    if (!zero) return Status::Ok();
    return Status::Corruption(
        Prefix() + "words: the all-zero state, which the engine cannot hold");
  }

  static Result<Engine> Restore(std::span<const std::byte> bytes) {
    RCKPT_ASSIGN_OR_RETURN(Stored s, Decode(bytes));
    Engine engine;
    if (s.index == kN) {
      // Every word has been output: the stored block is the state itself,
      // word for word (a freshly seeded engine's, for one).
      RCKPT_RETURN_IF_ERROR(CheckNotAllZero(s.words));
      WordsSeq seq{&s.words};
      engine.seed(seq);
      return engine;
    }
    RCKPT_ASSIGN_OR_RETURN(std::vector<Word> prev, PreviousBlock(s));
    WordsSeq seq{&prev};
    engine.seed(seq);
    engine.discard(s.index);
    return engine;
  }

  static std::vector<std::byte> Capture(const Engine& engine) {
    Engine copy = engine;
    std::vector<std::byte> out(kSize, std::byte{0});
    for (size_t i = 0; i < kMagicBytes; ++i)
      out[i] = static_cast<std::byte>(kMagic[i]);
    // index 0: the words below are the next n outputs, untempered.
    for (size_t i = 0; i < kN; ++i) {
      const uint64_t w = Untemper(copy());
      for (size_t b = 0; b < kWordBytes; ++b) {
        out[kWordsOffset + i * kWordBytes + b] =
            static_cast<std::byte>((w >> (8 * b)) & 0xff);
      }
    }
    return out;
  }
};

// ---- The legacy textual form ---------------------------------------------
//
// Files written before the binary layout hold the engine's operator<< text
// as GNU libstdc++ writes it ("C" locale): n words then the index. It is
// parsed with operator>>, as it was written.

// Generous for a textual engine state (mt19937: 624 words of at most 10
// digits plus an index), small enough that parsing a hostile record is cheap.
constexpr size_t kMaxEngineTextBytes = 64 * 1024;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool IsLegacyText(std::span<const std::byte> bytes) {
  if (bytes.empty()) return false;
  const char c = static_cast<char>(bytes[0]);
  return (c >= '0' && c <= '9') || IsSpace(c);
}

// The textual state is whitespace-separated decimal words, each below
// 2^word_bits (libstdc++ appends the position index, which is too). Checking
// this first keeps out-of-range words, which operator>> would store as they
// are, out of an engine.
Status CheckEngineText(RngKind kind, std::string_view text, int word_bits) {
  const std::string name(RngKindName(kind));
  if (text.size() > kMaxEngineTextBytes) {
    return Status::Corruption(name + " RNG state: size: expected at most " +
                              std::to_string(kMaxEngineTextBytes) +
                              " bytes, got " + std::to_string(text.size()));
  }
  const uint64_t max_word =
      word_bits >= 64 ? UINT64_MAX : (uint64_t{1} << word_bits) - 1;
  size_t i = 0;
  size_t words = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    const size_t start = i;
    uint64_t value = 0;
    bool overflow = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
      if (value > (max_word - digit) / 10) overflow = true;
      value = value * 10 + digit;
      ++i;
    }
    if (i == start) {
      return Status::Corruption(name + " RNG state: byte " + std::to_string(i) +
                                ": expected a digit or whitespace, got code " +
                                std::to_string(static_cast<unsigned char>(c)));
    }
    if (overflow) {
      return Status::Corruption(
          name + " RNG state: word " + std::to_string(words) +
          ": expected a value below 2^" + std::to_string(word_bits) +
          ", got '" + std::string(text.substr(start, i - start)) + "'");
    }
    ++words;
  }
  return Status::Ok();
}

template <typename Engine>
Result<Engine> ParseEngineText(RngKind kind, std::span<const std::byte> bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  RCKPT_RETURN_IF_ERROR(CheckEngineText(kind, text, Engine::word_size));
  std::istringstream in{std::string(text)};
  in.imbue(std::locale::classic());
  Engine engine;
  in >> engine;
  if (in.fail()) {
    return Status::Corruption(
        std::string(RngKindName(kind)) + " RNG state: expected the engine's " +
        std::to_string(Engine::state_size) + "-word textual state, got " +
        std::to_string(bytes.size()) + " bytes that do not parse as one");
  }
  in >> std::ws;
  if (!in.eof()) {
    return Status::Corruption(
        std::string(RngKindName(kind)) +
        " RNG state: expected the end of the state at byte " +
        std::to_string(static_cast<long long>(in.tellg())) + " of " +
        std::to_string(bytes.size()) + ", found more words");
  }
  return engine;
}

template <typename Engine>
Result<Engine> Parse(std::span<const std::byte> bytes) {
  if (IsLegacyText(bytes))
    return ParseEngineText<Engine>(Mt<Engine>::kKind, bytes);
  return Mt<Engine>::Restore(bytes);
}

template <typename Engine>
Status RestoreInto(std::span<const std::byte> bytes, Engine* engine) {
  RCKPT_ASSIGN_OR_RETURN(Engine restored, Parse<Engine>(bytes));
  *engine = restored;
  return Status::Ok();
}

}  // namespace

Status ValidateMtState(RngKind kind, std::span<const std::byte> bytes) {
  if (kind == RngKind::kMt19937_64)
    return Parse<std::mt19937_64>(bytes).status();
  return Parse<std::mt19937>(bytes).status();
}

std::vector<std::byte> CaptureEngine(const std::mt19937& engine) {
  return Mt<std::mt19937>::Capture(engine);
}

std::vector<std::byte> CaptureEngine(const std::mt19937_64& engine) {
  return Mt<std::mt19937_64>::Capture(engine);
}

Status RestoreEngine(std::span<const std::byte> bytes, std::mt19937* engine) {
  return RestoreInto(bytes, engine);
}

Status RestoreEngine(std::span<const std::byte> bytes,
                     std::mt19937_64* engine) {
  return RestoreInto(bytes, engine);
}

}  // namespace rckpt
