#include "rckpt/rng.h"

#include <cstring>
#include <locale>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng_layout.h"
#include "rng/engine_states.h"
#include "test_util.h"

namespace rckpt {
namespace {

std::vector<std::byte> Bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

std::string Text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

template <typename T>
void Put(std::vector<std::byte>& state, size_t offset, T value) {
  std::memcpy(state.data() + offset, &value, sizeof value);
}

template <typename T>
T Get(const std::vector<std::byte>& state, size_t offset) {
  T value;
  std::memcpy(&value, state.data() + offset, sizeof value);
  return value;
}

using testing::LegacyEngineText;
using testing::ReferenceEngineState;

// A torch CPU generator state as torch.manual_seed leaves it.
std::vector<std::byte> TorchCpuState() {
  std::vector<std::byte> state(5056);
  Put<uint64_t>(state, 0, 42);  // the_initial_seed
  Put<int32_t>(state, 8, 1);    // left
  Put<int32_t>(state, 12, 1);   // seeded
  Put<uint64_t>(state, 16, 0);  // next
  return state;
}

TEST(RngKindTest, NamesRoundTrip) {
  for (int raw = 0; raw < kNumRngKinds; ++raw) {
    const auto kind = static_cast<RngKind>(raw);
    RngKind parsed = RngKind::kOpaque;
    ASSERT_TRUE(ParseRngKind(RngKindName(kind), &parsed)) << raw;
    EXPECT_EQ(parsed, kind);
    EXPECT_TRUE(IsValidRngKind(static_cast<uint8_t>(raw)));
  }
  EXPECT_EQ(RngKindName(RngKind::kTorchCpu), "torch_cpu");
  EXPECT_EQ(RngKindName(RngKind::kMt19937_64), "mt19937_64");
  RngKind untouched = RngKind::kPython;
  EXPECT_FALSE(ParseRngKind("torch", &untouched));
  EXPECT_EQ(untouched, RngKind::kPython);
  EXPECT_FALSE(IsValidRngKind(kNumRngKinds));
  EXPECT_FALSE(IsValidRngKind(255));
}

TEST(TorchCpuStateTest, AcceptsFreshAndMidBlockStates) {
  std::vector<std::byte> state = TorchCpuState();
  EXPECT_OK(ValidateRngState(RngKind::kTorchCpu, state));
  Put<int32_t>(state, 8, 624);
  Put<uint64_t>(state, 16, 1);
  EXPECT_OK(ValidateRngState(RngKind::kTorchCpu, state));
  Put<int32_t>(state, 8, 1);
  Put<uint64_t>(state, 16, 624);
  EXPECT_OK(ValidateRngState(RngKind::kTorchCpu, state));
}

TEST(TorchCpuStateTest, RejectsWrongSize) {
  std::vector<std::byte> state = TorchCpuState();
  state.resize(5048);  // the legacy layout
  EXPECT_THAT(
      ValidateRngState(RngKind::kTorchCpu, state),
      StatusIs(StatusCode::kCorruption,
               "torch_cpu RNG state: size: expected 5056 bytes, got 5048"));
  EXPECT_THAT(ValidateRngState(RngKind::kTorchCpu, {}),
              StatusIs(StatusCode::kCorruption, "got 0"));
}

TEST(TorchCpuStateTest, RejectsUnseeded) {
  std::vector<std::byte> state = TorchCpuState();
  Put<int32_t>(state, 12, 0);
  EXPECT_THAT(ValidateRngState(RngKind::kTorchCpu, state),
              StatusIs(StatusCode::kCorruption,
                       "field 'seeded' (i32 at offset 12): expected 1, got 0"));
}

TEST(TorchCpuStateTest, RejectsLeftOutOfRange) {
  std::vector<std::byte> state = TorchCpuState();
  for (int32_t left : {0, -1, 625}) {
    Put<int32_t>(state, 8, left);
    EXPECT_THAT(
        ValidateRngState(RngKind::kTorchCpu, state),
        StatusIs(StatusCode::kCorruption,
                 "field 'left' (i32 at offset 8): expected 1..624, got " +
                     std::to_string(left)));
  }
}

TEST(TorchCpuStateTest, RejectsNextOutOfRange) {
  std::vector<std::byte> state = TorchCpuState();
  for (uint64_t next : {uint64_t{625}, UINT64_MAX}) {
    Put<uint64_t>(state, 16, next);
    EXPECT_THAT(
        ValidateRngState(RngKind::kTorchCpu, state),
        StatusIs(StatusCode::kCorruption,
                 "field 'next' (u64 at offset 16): expected at most 624, got " +
                     std::to_string(next)));
  }
}

TEST(TorchCudaStateTest, RequiresSixteenBytes) {
  EXPECT_OK(ValidateRngState(RngKind::kTorchCuda, std::vector<std::byte>(16)));
  EXPECT_THAT(
      ValidateRngState(RngKind::kTorchCuda, std::vector<std::byte>(15)),
      StatusIs(StatusCode::kCorruption,
               "torch_cuda RNG state: size: expected 16 bytes, got 15"));
}

TEST(OpaqueStatesTest, AcceptAnyBytes) {
  const std::vector<std::byte> junk = Bytes("\x01\xff not a state");
  for (RngKind kind : {RngKind::kOpaque, RngKind::kNumpy, RngKind::kPython}) {
    EXPECT_OK(ValidateRngState(kind, junk));
    EXPECT_OK(ValidateRngState(kind, {}));
  }
}

// --- numpy records (core/rng_layout.h) ---------------------------------------

TEST(NumpyLayoutTest, FieldsTileEachRecordAfterItsTag) {
  const size_t sizes[] = {4, 8, 16, 8};  // u32 u64 u128 f64
  ASSERT_EQ(NumpyRngLayouts().size(), 6u);
  for (const NumpyRngLayout& l : NumpyRngLayouts()) {
    EXPECT_EQ(l.tag, static_cast<uint32_t>(&l - NumpyRngLayouts().data()) + 1);
    size_t at = 4;
    for (const NumpyRngField& f : l.fields) {
      EXPECT_EQ(f.offset, at) << l.bit_generator << " " << f.path;
      at += sizes[static_cast<int>(f.type)] * f.count;
    }
    EXPECT_EQ(at, l.bytes) << l.bit_generator;
  }
  // FORMAT.md section 7's sizes.
  const uint32_t expected[] = {2516, 2504, 44, 44, 44, 96};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(NumpyRngLayouts()[i].bytes, expected[i]);
  EXPECT_TRUE(NumpyRngLayouts()[0].legacy);
}

std::vector<std::byte> NumpyRecord(uint32_t tag) {
  const NumpyRngLayout& l = NumpyRngLayouts()[tag - 1];
  std::vector<std::byte> r(l.bytes);
  Put<uint32_t>(r, 0, tag);
  return r;
}

TEST(NumpyLayoutTest, AcceptsEveryLayoutInRange) {
  for (uint32_t tag = 1; tag <= 6; ++tag) {
    auto r = NumpyRecord(tag);
    for (const NumpyRngField& f : NumpyRngLayouts()[tag - 1].fields) {
      if (f.max != 0) Put<uint32_t>(r, f.offset, f.max);
    }
    SCOPED_TRACE(tag);
    EXPECT_OK(ValidateNumpyRng(r));
    EXPECT_EQ(FindNumpyRngLayout(r), &NumpyRngLayouts()[tag - 1]);
  }
}

TEST(NumpyLayoutTest, RejectsEachDamagedField) {
  EXPECT_THAT(ValidateNumpyRng(Bytes("\x01")),
              StatusIs(StatusCode::kCorruption, "expected 1..6, got a record of 1 bytes"));
  auto r = NumpyRecord(1);
  Put<uint32_t>(r, 0, 7);
  EXPECT_THAT(ValidateNumpyRng(r), StatusIs(StatusCode::kCorruption, "expected 1..6, got 7"));
  r = NumpyRecord(3);
  r.push_back(std::byte{0});
  EXPECT_THAT(ValidateNumpyRng(r),
              StatusIs(StatusCode::kCorruption, "PCG64): size: expected 44 bytes, got 45"));
  r = NumpyRecord(1);
  Put<uint32_t>(r, 2500, 625);
  EXPECT_THAT(ValidateNumpyRng(r),
              StatusIs(StatusCode::kCorruption,
                       "MT19937 get_state()): field '2' (u32 at offset 2500): expected 0..624, "
                       "got 625"));
  r = NumpyRecord(1);
  Put<uint32_t>(r, 2504, 2);
  EXPECT_THAT(ValidateNumpyRng(r), StatusIs(StatusCode::kCorruption, "field '3'"));
  r = NumpyRecord(2);
  Put<uint32_t>(r, 2500, 1000);
  EXPECT_THAT(ValidateNumpyRng(r), StatusIs(StatusCode::kCorruption, "field 'state.pos'"));
  r = NumpyRecord(6);
  Put<uint32_t>(r, 84, 5);
  EXPECT_THAT(ValidateNumpyRng(r), StatusIs(StatusCode::kCorruption, "field 'buffer_pos'"));
  r = NumpyRecord(5);
  Put<uint32_t>(r, 36, 2);
  EXPECT_THAT(ValidateNumpyRng(r), StatusIs(StatusCode::kCorruption, "field 'has_uint32'"));
  // A load takes any bytes under the numpy kind (FORMAT.md section 7).
  EXPECT_OK(ValidateRngState(RngKind::kNumpy, r));
}

TEST(EngineStateTest, Mt19937_64RestoredMidStreamContinuesSequence) {
  std::mt19937_64 engine(12345);
  engine.discard(1000);
  const std::vector<std::byte> state = CaptureEngine(engine);
  EXPECT_OK(ValidateRngState(RngKind::kMt19937_64, state));
  std::mt19937_64 restored;  // default seed: a different position
  ASSERT_OK(RestoreEngine(state, &restored));
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(restored(), engine()) << i;
}

TEST(EngineStateTest, Mt19937RestoredMidStreamContinuesSequence) {
  std::mt19937 engine(777);
  engine.discard(623);
  const std::vector<std::byte> state = CaptureEngine(engine);
  EXPECT_OK(ValidateRngState(RngKind::kMt19937, state));
  std::mt19937 restored;
  ASSERT_OK(RestoreEngine(state, &restored));
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(restored(), engine()) << i;
}

// mt19937's tempering ([rand.predef]), to read the stored words back as the
// outputs they stand for.
uint32_t Temper32(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

TEST(BinaryLayoutTest, CaptureWritesMagicIndexZeroAndTheNextWords) {
  std::mt19937 engine(2024);
  engine.discard(300);
  const std::vector<std::byte> state = CaptureEngine(engine);
  ASSERT_EQ(state.size(), 2504u);
  EXPECT_EQ(Text(state).substr(0, 4), "MT32");
  EXPECT_EQ(Get<uint32_t>(state, 4), 0u);  // index
  for (size_t i = 0; i < 624; ++i) {
    ASSERT_EQ(Temper32(Get<uint32_t>(state, 8 + 4 * i)), engine()) << "word " << i;
  }
  std::mt19937_64 engine64(2024);
  const std::vector<std::byte> state64 = CaptureEngine(engine64);
  ASSERT_EQ(state64.size(), 2504u);
  EXPECT_EQ(Text(state64).substr(0, 4), "MT64");
  EXPECT_EQ(Get<uint32_t>(state64, 4), 0u);
}

TEST(BinaryLayoutTest, CaptureOfARestoredEngineGivesTheSameBytes) {
  std::mt19937_64 engine(31);
  engine.discard(5000);
  const std::vector<std::byte> state = CaptureEngine(engine);
  std::mt19937_64 restored;
  ASSERT_OK(RestoreEngine(state, &restored));
  EXPECT_EQ(CaptureEngine(restored), state);
}

// The layout's words and index are mt19937ar.c's mt[] and mti: the
// reference implementation's state after init_genrand(5489) (index n, the
// next output twists), restored, gives the standard's 10000th output.
TEST(BinaryLayoutTest, RestoresTheReferenceImplementationsState) {
  std::mt19937 restored(1);
  ASSERT_OK(RestoreEngine(ReferenceEngineState<uint32_t>(5489), &restored));
  restored.discard(9999);
  EXPECT_EQ(restored(), 4123659995u);
  std::mt19937_64 restored64(1);
  ASSERT_OK(RestoreEngine(ReferenceEngineState<uint64_t>(5489), &restored64));
  restored64.discard(9999);
  EXPECT_EQ(restored64(), 9981545732273789042ull);
}

#if defined(__GLIBCXX__)
// libstdc++ keeps exactly the layout's words and index (_M_x, _M_p) and
// prints them: a record made from that text restores an engine equal to the
// original under operator==, at every position within a block.
TEST(BinaryLayoutTest, MatchesLibstdcxxWordsAndPosition) {
  for (int discard : {0, 1, 225, 226, 227, 396, 397, 622, 623, 624, 1000}) {
    SCOPED_TRACE(discard);
    std::mt19937 engine(99);
    engine.discard(discard);
    std::istringstream text(Text(LegacyEngineText(engine)));
    std::vector<std::byte> state = Bytes("MT32");
    state.resize(2504);
    uint32_t word = 0;
    for (size_t i = 0; i < 624 && text >> word; ++i) Put<uint32_t>(state, 8 + 4 * i, word);
    uint32_t index = 0;
    ASSERT_TRUE(text >> index);
    Put<uint32_t>(state, 4, index);
    std::mt19937 restored;
    ASSERT_OK(RestoreEngine(state, &restored));
    EXPECT_EQ(restored, engine);
    for (int i = 0; i < 1300; ++i) ASSERT_EQ(restored(), engine()) << i;
  }
}
#endif

TEST(BinaryLayoutTest, RejectsEachDamagedField) {
  std::mt19937 engine(8);
  const std::vector<std::byte> good = CaptureEngine(engine);
  std::mt19937 target(3);
  const std::mt19937 before = target;

  std::vector<std::byte> b = good;
  b[3] = std::byte{'4'};
  EXPECT_THAT(RestoreEngine(b, &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: field 'magic' (4 bytes at offset 0): expected 'MT32' "
                       "(or the legacy textual state), got 'MT34'"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937_64, good),
              StatusIs(StatusCode::kCorruption, "expected 'MT64' (or the legacy textual "
                                                "state), got 'MT32'"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, Bytes("\x01\xffxyz")),
              StatusIs(StatusCode::kCorruption, "got '\\x01\\xffxy'"));

  b = good;
  b.pop_back();
  EXPECT_THAT(RestoreEngine(b, &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: size: expected 2504 bytes, got 2503"));
  EXPECT_THAT(RestoreEngine({}, &target),
              StatusIs(StatusCode::kCorruption, "size: expected 2504 bytes, got 0"));

  b = good;
  Put<uint32_t>(b, 4, 625);
  EXPECT_THAT(RestoreEngine(b, &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: field 'index' (u32 at offset 4): expected 0..624, "
                       "got 625"));
  std::vector<std::byte> b64 = CaptureEngine(std::mt19937_64(8));
  Put<uint32_t>(b64, 4, 313);
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937_64, b64),
              StatusIs(StatusCode::kCorruption, "expected 0..312, got 313"));

  // At index 0 word 0 is still to be output, and its low bits are fixed by
  // the words the twist made it with.
  b = good;
  b[8] ^= std::byte{1};
  EXPECT_THAT(RestoreEngine(b, &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: word 0 (at offset 8): its low 31 bits"));

  b = std::vector<std::byte>(2504);
  std::memcpy(b.data(), "MT32", 4);
  Put<uint32_t>(b, 4, 624);
  EXPECT_THAT(RestoreEngine(b, &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: words: the all-zero state, which the engine "
                       "cannot hold"));
  EXPECT_EQ(target, before);
}

TEST(BinaryLayoutTest, LowBitsOfAnOutputWordZeroDoNotMatter) {
  // Past index 0, word 0 has been output; only its top bit feeds the twist.
  std::mt19937 engine(8);
  std::vector<std::byte> state = CaptureEngine(engine);
  Put<uint32_t>(state, 4, 1);
  state[8] ^= std::byte{0x5a};
  std::mt19937 restored;
  ASSERT_OK(RestoreEngine(state, &restored));
  engine.discard(1);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(restored(), engine()) << i;
}

TEST(LegacyTextTest, RestoresAndCapturesUnderAnyGlobalLocale) {
  // A locale that groups digits ("1,234,567") must not change how the
  // textual form of earlier files parses.
  struct Grouping : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  std::mt19937_64 engine(99);
  engine.discard(10);
  const std::vector<std::byte> text = LegacyEngineText(engine);
  const std::vector<std::byte> binary = CaptureEngine(engine);
  const std::locale previous =
      std::locale::global(std::locale(std::locale::classic(), new Grouping));
  std::mt19937_64 restored;
  const Status s = RestoreEngine(text, &restored);
  const std::vector<std::byte> captured = CaptureEngine(engine);
  std::locale::global(previous);
  ASSERT_OK(s);
  EXPECT_EQ(restored, engine);
  EXPECT_EQ(captured, binary);  // the binary layout never meets a locale
}

TEST(LegacyTextTest, RestoringGarbageFailsAndLeavesEngineUnchanged) {
  std::mt19937_64 engine(5);
  const std::mt19937_64 before = engine;
  EXPECT_THAT(RestoreEngine(Bytes("12 hello"), &engine),
              StatusIs(StatusCode::kCorruption,
                       "mt19937_64 RNG state: byte 3: expected a digit"));
  EXPECT_THAT(RestoreEngine(Bytes(" "), &engine),
              StatusIs(StatusCode::kCorruption,
                       "mt19937_64 RNG state: expected the engine's textual state, 313 "
                       "numbers (312 words, then the index), got 0"));
  EXPECT_THAT(RestoreEngine(Bytes("1 2 3"), &engine),
              StatusIs(StatusCode::kCorruption, "got 3"));
  EXPECT_THAT(RestoreEngine(Bytes("1 -2 3"), &engine),
              StatusIs(StatusCode::kCorruption, "byte 2: expected a digit or whitespace, got "
                                                "code 45"));
  EXPECT_EQ(engine, before);
}

TEST(LegacyTextTest, RejectsTrailingWords) {
  std::mt19937 engine(1);
  std::vector<std::byte> state = LegacyEngineText(engine);
  const std::vector<std::byte> more = Bytes(" 17 \n");
  state.insert(state.end(), more.begin(), more.end());
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, state),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: expected the end of the state after 625 numbers "
                       "(624 words, then the index), found more at byte " +
                           std::to_string(state.size() - 4)));
  // Trailing whitespace alone is fine.
  std::vector<std::byte> spaced = LegacyEngineText(engine);
  spaced.push_back(std::byte{'\n'});
  EXPECT_OK(ValidateRngState(RngKind::kMt19937, spaced));
}

TEST(LegacyTextTest, RejectsWordBeyondEngineWidth) {
  std::mt19937 engine(1);
  std::string text = Text(LegacyEngineText(engine));
  text = "4294967296" + text.substr(text.find(' '));
  std::mt19937 target(2);
  const std::mt19937 before = target;
  EXPECT_THAT(
      RestoreEngine(Bytes(text), &target),
      StatusIs(StatusCode::kCorruption,
               "mt19937 RNG state: word 0 (number 1 of the textual state): expected a "
               "value below 2^32, got '4294967296'"));
  EXPECT_EQ(target, before);
}

TEST(LegacyTextTest, RejectsHugeRecordWithoutParsing) {
  const std::vector<std::byte> huge(1 << 20, std::byte{'1'});
  EXPECT_THAT(
      ValidateRngState(RngKind::kMt19937_64, huge),
      StatusIs(StatusCode::kCorruption, "size: expected at most 65536 bytes"));
}

TEST(LegacyTextTest, Mt19937StateIsNotAnMt19937_64State) {
  std::mt19937 engine(3);
  EXPECT_FALSE(ValidateRngState(RngKind::kMt19937_64, LegacyEngineText(engine)).ok());
}

// The textual form of n words and an index, as libstdc++'s operator<< writes
// it, for states no engine printed.
template <typename Word>
std::vector<std::byte> TextState(const std::vector<Word>& words, uint64_t index) {
  std::string text;
  for (Word w : words) text += std::to_string(w) + " ";
  return Bytes(text + std::to_string(index));
}

// The binary layout (schema/FORMAT.md 7.1) of the same words and index.
template <typename Word>
std::vector<std::byte> BinaryState(const std::vector<Word>& words, uint32_t index) {
  std::vector<std::byte> state = Bytes(sizeof(Word) == 8 ? "MT64" : "MT32");
  state.resize(2504);
  Put<uint32_t>(state, 4, index);
  for (size_t i = 0; i < words.size(); ++i) Put<Word>(state, 8 + sizeof(Word) * i, words[i]);
  return state;
}

// The words of a binary-layout state.
template <typename Word>
std::vector<Word> WordsOf(const std::vector<std::byte>& state) {
  std::vector<Word> words((state.size() - 8) / sizeof(Word));
  for (size_t i = 0; i < words.size(); ++i) words[i] = Get<Word>(state, 8 + sizeof(Word) * i);
  return words;
}

// At index 0 word 0 is still to be output, and a twist always makes its low
// bits from words n-1 and m-1. libstdc++'s operator>> holds such a text
// anyway; its engine would then capture to a binary state that is refused.
// Both forms are refused alike.
TEST(LegacyTextTest, UnreachableStateAtIndexZeroIsRefusedAsInTheBinaryLayout) {
  std::mt19937_64 engine(21);
  engine.discard(40);
  std::vector<uint64_t> words = WordsOf<uint64_t>(CaptureEngine(engine));
  words[0] ^= 1;
  std::mt19937_64 target(3);
  const std::mt19937_64 before = target;
  EXPECT_THAT(RestoreEngine(TextState(words, 0), &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937_64 RNG state: word 0 (number 1 of the textual state): its low "
                       "31 bits"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937_64, TextState(words, 0)),
              StatusIs(StatusCode::kCorruption, "not a state the engine can reach"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937_64, BinaryState(words, 0)),
              StatusIs(StatusCode::kCorruption,
                       "mt19937_64 RNG state: word 0 (at offset 8): its low 31 bits"));
  EXPECT_EQ(target, before);
  // Once word 0 has been output its low bits feed nothing: index 1 restores.
  ASSERT_OK(RestoreEngine(TextState(words, 1), &target));
  engine.discard(1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(target(), engine()) << i;
}

TEST(LegacyTextTest, ReachableStateAtIndexZeroRestoresAndCapturesBack) {
  std::mt19937 engine(4);
  engine.discard(1000);
  const std::vector<std::byte> binary = CaptureEngine(engine);
  std::mt19937 restored;
  ASSERT_OK(RestoreEngine(TextState(WordsOf<uint32_t>(binary), 0), &restored));
  EXPECT_EQ(CaptureEngine(restored), binary);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(restored(), engine()) << i;
}

// A real engine's index is 0..n (libstdc++ prints n after seeding); a larger
// one, which operator>> would hold, breaks discard().
TEST(LegacyTextTest, RejectsIndexBeyondTheState) {
  std::mt19937 engine(6);
  std::vector<uint32_t> words = WordsOf<uint32_t>(CaptureEngine(engine));
  std::mt19937 target(2);
  const std::mt19937 before = target;
  EXPECT_THAT(RestoreEngine(TextState(words, 625), &target),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: the index (number 625 of the textual state): "
                       "expected 0..624, got 625"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, TextState(words, uint64_t{1} << 32)),
              StatusIs(StatusCode::kCorruption, "expected 0..624, got 4294967296"));
  EXPECT_EQ(target, before);
}

TEST(LegacyTextTest, RejectsIndexBeyondSixtyFourBits) {
  const std::vector<uint64_t> words(312, 1);
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937_64,
                               Bytes(Text(TextState(words, 1)) + "8446744073709551616")),
              StatusIs(StatusCode::kCorruption,
                       "the index (number 313 of the textual state): expected 0..312, got "
                       "18446744073709551616"));
}

// An all-zero state outputs zeros forever; no engine reaches it, and seed()
// would not install it.
TEST(LegacyTextTest, RejectsTheAllZeroState) {
  std::vector<uint32_t> zero(624, 0);
  zero[0] = 0x7fffffff;  // word 0's low bits never reach an output at index n
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, TextState(zero, 624)),
              StatusIs(StatusCode::kCorruption,
                       "mt19937 RNG state: words: the all-zero state, which the engine "
                       "cannot hold"));
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, TextState(std::vector<uint32_t>(624, 0), 5)),
              StatusIs(StatusCode::kCorruption, "the all-zero state"));
}

// One rule for both forms: the same words and index are valid as text
// exactly when they are valid in the binary layout, and then restore the
// same sequence, whose capture is valid again.
TEST(LegacyTextTest, TextAndBinaryFormsOfOneStateGetTheSameVerdict) {
  std::mt19937_64 source(77);
  int valid = 0;
  int invalid = 0;
  for (uint32_t index : {0u, 1u, 155u, 311u, 312u}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(::testing::Message() << "index " << index << ", variant " << variant);
      source.discard(7);
      std::vector<uint64_t> words = WordsOf<uint64_t>(CaptureEngine(source));
      if (variant == 1) words[0] ^= uint64_t{1} << 5;  // low bits of word 0
      if (variant == 2) words[0] ^= uint64_t{1} << 63;  // its top bit
      if (variant == 3) words.assign(312, 0);
      const std::vector<std::byte> text = TextState(words, index);
      const std::vector<std::byte> binary = BinaryState(words, index);
      const Status text_status = ValidateRngState(RngKind::kMt19937_64, text);
      const Status binary_status = ValidateRngState(RngKind::kMt19937_64, binary);
      ASSERT_EQ(text_status.ok(), binary_status.ok())
          << "text: " << text_status.ToString() << "; binary: " << binary_status.ToString();
      if (!text_status.ok()) {
        ++invalid;
        continue;
      }
      ++valid;
      std::mt19937_64 from_text;
      std::mt19937_64 from_binary;
      ASSERT_OK(RestoreEngine(text, &from_text));
      ASSERT_OK(RestoreEngine(binary, &from_binary));
      EXPECT_OK(ValidateRngState(RngKind::kMt19937_64, CaptureEngine(from_text)));
      for (int i = 0; i < 700; ++i) ASSERT_EQ(from_text(), from_binary()) << i;
    }
  }
  // Both verdicts occur: the loop compared something.
  EXPECT_GT(valid, 0);
  EXPECT_GT(invalid, 0);
}

}  // namespace
}  // namespace rckpt
