#include "core/mt_state.h"

#include "core/rng_layout.h"
#include "util/hex.h"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace rckpt {
namespace {

// Only standard interfaces touch the engine, so the layout does not depend on
// how a standard library keeps or prints its state: capture reads the next n
// outputs and inverts the tempering, which gives the next n words (index 0);
// restore computes the block before the stored one by running the recurrence
// backwards, hands it to seed(Sseq&), which the standard defines to install
// exactly those words as the engine's state, and discards p outputs.
//
// Both stored forms, the binary layout and the legacy textual one, decode to
// the same words and index, and one rule (SeedWords) decides for both which
// states are valid and how they restore: validation is a restore.

constexpr size_t kMagicBytes = kMtMagicBytes;
constexpr size_t kIndexOffset = kMtIndexOffset;
constexpr size_t kWordsOffset = kMtWordsOffset;

// Generous for a textual engine state (mt19937: 624 words of at most 10
// digits plus an index), small enough that parsing a hostile record is cheap.
constexpr size_t kMaxEngineTextBytes = 64 * 1024;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Files written before the binary layout hold the engine's textual state,
// which begins with a digit (or whitespace); the binary layout begins with
// its magic.
bool IsLegacyText(std::span<const std::byte> bytes) {
  if (bytes.empty()) return false;
  const char c = static_cast<char>(bytes[0]);
  return (c >= '0' && c <= '9') || IsSpace(c);
}

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

  // A stored state in either form. The words and index mean what
  // libstdc++'s _M_x and _M_p (and mt19937ar.c's mt[] and mti) mean: the
  // next outputs are the tempered words index..n-1, then those of the block
  // the twist makes from all n.
  struct Stored {
    bool text = false;  // read from the legacy textual form
    uint64_t index = 0;
    std::vector<Word> words;
  };

  static std::string WordName(const Stored& s, size_t i) {
    if (s.text) {
      return "word " + std::to_string(i) + " (number " + std::to_string(i + 1) +
             " of the textual state)";
    }
    return "word " + std::to_string(i) + " (at offset " +
           std::to_string(kWordsOffset + i * kWordBytes) + ")";
  }

  static std::string IndexName(bool text) {
    if (text) {
      return "the index (number " + std::to_string(kN + 1) +
             " of the textual state)";
    }
    return "field 'index' (u32 at offset " + std::to_string(kIndexOffset) + ")";
  }

  static Status IndexOutOfRange(bool text, const std::string& got) {
    return Status::Corruption(Prefix() + IndexName(text) + ": expected 0.." +
                              std::to_string(kN) + ", got " + got);
  }

  static Result<Stored> DecodeBinary(std::span<const std::byte> bytes) {
    if (bytes.size() >= kMagicBytes &&
        std::string_view(reinterpret_cast<const char*>(bytes.data()),
                         kMagicBytes) != kMagic) {
      std::string got;
      for (size_t i = 0; i < kMagicBytes; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
          got += static_cast<char>(c);
        } else {
          AppendEscapedByte(got, c);
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
    s.index = Le(bytes, kIndexOffset, 4);
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

  // The legacy textual form: GNU libstdc++'s operator<< in the "C" locale,
  // the n words and then the index, decimal, separated by whitespace. This
  // reads what operator>> reads from such text, without a stream or a
  // locale: exactly n + 1 unsigned decimal numbers, each word below 2^w.
  // (operator>> would also take a sign, "-1" as the largest value, and keep
  // a word of 2^w or more as it is; libstdc++ writes none of that.)
  static Result<Stored> DecodeText(std::span<const std::byte> bytes) {
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                                bytes.size());
    if (text.size() > kMaxEngineTextBytes) {
      return Status::Corruption(Prefix() + "size: expected at most " +
                                std::to_string(kMaxEngineTextBytes) +
                                " bytes, got " + std::to_string(text.size()));
    }
    Stored s;
    s.text = true;
    s.words.reserve(kN);
    size_t numbers = 0;
    size_t i = 0;
    while (i < text.size()) {
      if (IsSpace(text[i])) {
        ++i;
        continue;
      }
      const size_t start = i;
      if (numbers == kN + 1) {
        return Status::Corruption(
            Prefix() + "expected the end of the state after " +
            std::to_string(kN + 1) + " numbers (" + std::to_string(kN) +
            " words, then the index), found more at byte " +
            std::to_string(start) + " of " + std::to_string(text.size()));
      }
      // Words are below 2^w; the index is any u64 until the rule checks it.
      const uint64_t max = numbers < kN ? uint64_t{kWordMask} : UINT64_MAX;
      uint64_t value = 0;
      bool overflow = false;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        const auto digit = static_cast<uint64_t>(text[i] - '0');
        if (value > (max - digit) / 10) overflow = true;
        value = value * 10 + digit;
        ++i;
      }
      if (i == start) {
        return Status::Corruption(
            Prefix() + "byte " + std::to_string(i) +
            ": expected a digit or whitespace, got code " +
            std::to_string(static_cast<unsigned char>(text[i])));
      }
      const std::string_view digits = text.substr(start, i - start);
      if (overflow && numbers < kN) {
        return Status::Corruption(Prefix() + WordName(s, numbers) +
                                  ": expected a value below 2^" +
                                  std::to_string(kW) + ", got '" +
                                  std::string(digits) + "'");
      }
      if (overflow) return IndexOutOfRange(true, std::string(digits));
      if (numbers < kN) {
        s.words.push_back(static_cast<Word>(value));
      } else {
        s.index = value;
      }
      ++numbers;
    }
    if (numbers != kN + 1) {
      return Status::Corruption(
          Prefix() + "expected the engine's textual state, " +
          std::to_string(kN + 1) + " numbers (" + std::to_string(kN) +
          " words, then the index), got " + std::to_string(numbers));
    }
    return s;
  }

  // The one rule of which stored states are valid, for both forms: the
  // index is 0..n and the state is one an engine can reach. Returns the
  // words seed() installs so that the engine continues the stored sequence
  // once it has discarded `index` outputs (index n: none).
  //
  // Below index n the words installed are the n words before the stored
  // block. X_{k+n} = X_{k+m} ^ T(upper(X_k) | lower(X_{k+1})) run backwards
  // from the block's last word; each step gives the upper bits of one word
  // and the lower bits of the next. The lower bits of the first word never
  // reach an output (zero).
  static Result<std::vector<Word>> SeedWords(const Stored& s) {
    if (s.index > kN) return IndexOutOfRange(s.text, std::to_string(s.index));
    if (s.index == kN) {
      // Every word has been output: the stored block is the state itself,
      // word for word (a freshly seeded engine's, for one).
      RCKPT_RETURN_IF_ERROR(CheckNotAllZero(s.words));
      return s.words;
    }
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
      // (the twist reads word 0's lower bits only after it has replaced
      // word 0), so they are taken from the recurrence. At index 0 word 0 is
      // still to be output: a twist always makes it with these bits, and a
      // stored word 0 that disagrees is a state no engine can reach, although
      // libstdc++'s operator>> would hold it and output it once.
      const Word expected_low = y & kLowerMask;
      if (s.index == 0 && (block[0] & kLowerMask) != expected_low) {
        return Status::Corruption(
            Prefix() + WordName(s, 0) + ": its low " +
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
  // lower bits (the standard's rule), so it cannot be restored; no engine
  // reaches it, since the twist keeps it zero.
  static Status CheckNotAllZero(const std::vector<Word>& state) {
    bool zero = (state[0] & kUpperMask) == 0;
    for (size_t i = 1; zero && i < kN; ++i) zero = state[i] == 0;
    if (!zero) return Status::Ok();
    return Status::Corruption(
        Prefix() + "words: the all-zero state, which the engine cannot hold");
  }

  static Result<Engine> Restore(std::span<const std::byte> bytes) {
    RCKPT_ASSIGN_OR_RETURN(
        Stored s, IsLegacyText(bytes) ? DecodeText(bytes) : DecodeBinary(bytes));
    RCKPT_ASSIGN_OR_RETURN(std::vector<Word> seed_words, SeedWords(s));
    Engine engine;
    WordsSeq seq{&seed_words};
    engine.seed(seq);
    if (s.index < kN) engine.discard(s.index);
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

template <typename Engine>
Status RestoreInto(std::span<const std::byte> bytes, Engine* engine) {
  RCKPT_ASSIGN_OR_RETURN(Engine restored, Mt<Engine>::Restore(bytes));
  *engine = restored;
  return Status::Ok();
}

}  // namespace

Status ValidateMtState(RngKind kind, std::span<const std::byte> bytes) {
  if (kind == RngKind::kMt19937_64)
    return Mt<std::mt19937_64>::Restore(bytes).status();
  return Mt<std::mt19937>::Restore(bytes).status();
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
