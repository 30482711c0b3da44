#include "rckpt/rng.h"

#include <cstring>
#include <locale>
#include <random>
#include <string>
#include <vector>

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

TEST(EngineStateTest, CaptureIgnoresTheGlobalLocale) {
  // A locale that groups digits ("1,234,567") must not leak into the bytes.
  struct Grouping : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  const std::locale previous =
      std::locale::global(std::locale(std::locale::classic(), new Grouping));
  std::mt19937_64 engine(99);
  const std::vector<std::byte> state = CaptureEngine(engine);
  std::mt19937_64 restored;
  const Status s = RestoreEngine(state, &restored);
  std::locale::global(previous);
  EXPECT_EQ(Text(state).find(','), std::string::npos);
  ASSERT_OK(s);
  EXPECT_EQ(restored, engine);
}

TEST(EngineStateTest, RestoringGarbageFailsAndLeavesEngineUnchanged) {
  std::mt19937_64 engine(5);
  const std::mt19937_64 before = engine;
  EXPECT_THAT(RestoreEngine(Bytes("hello"), &engine),
              StatusIs(StatusCode::kCorruption,
                       "mt19937_64 RNG state: byte 0: expected a digit"));
  EXPECT_THAT(RestoreEngine({}, &engine),
              StatusIs(StatusCode::kCorruption, "do not parse"));
  EXPECT_THAT(RestoreEngine(Bytes("1 2 3"), &engine),
              StatusIs(StatusCode::kCorruption, "do not parse"));
  EXPECT_EQ(engine, before);
}

TEST(EngineStateTest, RejectsTrailingWords) {
  std::mt19937 engine(1);
  std::vector<std::byte> state = CaptureEngine(engine);
  const std::vector<std::byte> more = Bytes(" 17 \n");
  state.insert(state.end(), more.begin(), more.end());
  EXPECT_THAT(ValidateRngState(RngKind::kMt19937, state),
              StatusIs(StatusCode::kCorruption, "found more words"));
  // Trailing whitespace alone is fine.
  std::vector<std::byte> spaced = CaptureEngine(engine);
  spaced.push_back(std::byte{'\n'});
  EXPECT_OK(ValidateRngState(RngKind::kMt19937, spaced));
}

TEST(EngineStateTest, RejectsWordBeyondEngineWidth) {
  std::mt19937 engine(1);
  std::string text = Text(CaptureEngine(engine));
  text = "4294967296" + text.substr(text.find(' '));
  std::mt19937 target(2);
  const std::mt19937 before = target;
  EXPECT_THAT(
      RestoreEngine(Bytes(text), &target),
      StatusIs(StatusCode::kCorruption,
               "word 0: expected a value below 2^32, got '4294967296'"));
  EXPECT_EQ(target, before);
}

TEST(EngineStateTest, RejectsHugeRecordWithoutParsing) {
  const std::vector<std::byte> huge(1 << 20, std::byte{'1'});
  EXPECT_THAT(
      ValidateRngState(RngKind::kMt19937_64, huge),
      StatusIs(StatusCode::kCorruption, "size: expected at most 65536 bytes"));
}

TEST(EngineStateTest, Mt19937StateIsNotAnMt19937_64State) {
  std::mt19937 engine(3);
  EXPECT_FALSE(
      ValidateRngState(RngKind::kMt19937_64, CaptureEngine(engine)).ok());
}

}  // namespace
}  // namespace rckpt
