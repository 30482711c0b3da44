#include "convert/pickle_reader.h"

#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include "convert/bytes.h"
#include "convert_test_util.h"
#include "test_util.h"

namespace rckpt::convert {
namespace {

using ::rckpt::testing::PGlobal;
using ::rckpt::testing::PInt;
using ::rckpt::testing::PStr;

std::string Memo(char op, int i) { return std::string(1, op) + static_cast<char>(i); }

// The pieces of a pickle, appended in order. (GCC 12 at -O3 misreports
// "text" + a std::string temporary as an overlapping copy; appending is what
// that operator does anyway.)
std::string Cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view piece : pieces) out.append(piece);
  return out;
}

Result<PickleResult> Unpick(const std::string& body, bool strict = false,
                         PickleLimits limits = {}) {
  static std::string keep;
  keep = "\x80\x02" + body;
  return Unpickle(AsBytes(keep), limits, strict);
}

// --- decoding ---------------------------------------------------------------

TEST(PickleTest, DecodesIntsOfEveryWidth) {
  // LONG1 with 5 bytes (a uint32 >= 2^31, as random.getstate() writes),
  // negative LONG1, BININT, and a 9-byte LONG1 that needs a big int.
  std::string p = Cat({"(", PInt(7), "M\x01\x02", "J\xff\xff\xff\xff",
                       std::string_view("\x8a\x05\x00\x00\x00\x80\x00", 7),
                       std::string_view("\x8a\x01\xfe", 3),
                       std::string_view("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01", 11),
                       std::string_view("\x8a\x00", 2), "l."});
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  const auto& it = r.root->items;
  ASSERT_EQ(it.size(), 7u);
  EXPECT_EQ(it[0]->i, 7);
  EXPECT_EQ(it[1]->i, 0x0201);
  EXPECT_EQ(it[2]->i, -1);
  EXPECT_EQ(it[3]->i, 2147483648LL);
  EXPECT_EQ(it[4]->i, -2);
  EXPECT_EQ(it[5]->kind, PyKind::kBigInt);
  EXPECT_EQ(it[5]->s.size(), 9u);
  EXPECT_EQ(it[6]->i, 0);
}

TEST(PickleTest, DecodesBigEndianFloatsIncludingSpecials) {
  std::string p = Cat({"(G", std::string_view("\x3f\xf8\x00\x00\x00\x00\x00\x00", 8), "G",
                       std::string_view("\x7f\xf0\x00\x00\x00\x00\x00\x00", 8), "G",
                       std::string_view("\x7f\xf8\x00\x00\x00\x00\x00\x00", 8), "G",
                       std::string_view("\x80\x00\x00\x00\x00\x00\x00\x00", 8), "l."});
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  EXPECT_EQ(r.root->items[0]->f, 1.5);
  EXPECT_TRUE(std::isinf(r.root->items[1]->f));
  EXPECT_TRUE(std::isnan(r.root->items[2]->f));
  EXPECT_TRUE(std::signbit(r.root->items[3]->f));
}

TEST(PickleTest, DecodesBytesFromCodecsEncode) {
  // b'\x00\xff' pickled by protocol 2: _codecs.encode('\x00\xff', 'latin1').
  std::string p = PGlobal("_codecs", "encode") + PStr(std::string("\x00\xc3\xbf", 3)) +
                  PStr("latin1") + "\x86R.";
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  EXPECT_EQ(r.root->kind, PyKind::kBytes);
  EXPECT_EQ(r.root->s, std::string("\x00\xff", 2));
}

TEST(PickleTest, KeepsOrderedDictStateFromBuild) {
  std::string p = PGlobal("collections", "OrderedDict") + ")R" + Memo('q', 0) + "(" + PStr("w") + PInt(1) +
                  "u}" + PStr("_metadata") + "}sb.";
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  ASSERT_EQ(r.root->kind, PyKind::kDict);
  ASSERT_EQ(r.root->entries.size(), 1u);
  ASSERT_NE(r.root->state, nullptr);
  EXPECT_EQ(r.root->state->entries[0].first->s, "_metadata");
}

TEST(PickleTest, DuplicateDictKeyKeepsFirstPositionAndLastValue) {
  std::string p = Cat({"}(", PStr("a"), PInt(1), PStr("b"), PInt(2), PStr("a"), PInt(3), "u."});
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  ASSERT_EQ(r.root->entries.size(), 2u);
  EXPECT_EQ(r.root->entries[0].first->s, "a");
  EXPECT_EQ(r.root->entries[0].second->i, 3);
}

TEST(PickleTest, MemoSharesMutableContainers) {
  // l = []; d = {'x': l, 'y': l}; l.append(1) after both references exist.
  std::string p =
      Cat({"}(", PStr("x"), "]q\x01", PStr("y"), "h\x01u", "h\x01", PInt(1), "a0."});
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  EXPECT_EQ(r.root->entries[0].second, r.root->entries[1].second);
  EXPECT_EQ(r.root->entries[1].second->items.size(), 1u);
}

TEST(PickleTest, SetsAndRecognisedValues) {
  std::string p = Cat({"(", PGlobal("__builtin__", "set"), "](", PInt(1), PInt(2), "e\x85R",
                       PGlobal("torch", "Size"), PInt(2), PInt(3), "\x86\x85R",
                       PGlobal("torch", "device"), PStr("cuda"), PInt(1), "\x86R",
                       PGlobal("torch", "bfloat16"), "l."});
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  const auto& it = r.root->items;
  EXPECT_EQ(it[0]->kind, PyKind::kSet);
  EXPECT_EQ(it[0]->items.size(), 2u);
  EXPECT_EQ(it[1]->kind, PyKind::kKnown);
  EXPECT_EQ(it[1]->s, "torch.Size");
  EXPECT_EQ(it[2]->s, "torch.device");
  EXPECT_EQ(it[3]->kind, PyKind::kGlobal);
  EXPECT_TRUE(r.unknown_classes.empty());
}

TEST(PickleTest, UnknownClassesBecomeInertObjects) {
  // NEWOBJ of a dict subclass, then SETITEMS into it and BUILD of its state.
  std::string p = PGlobal("mylib.config", "AttrDict") + ")\x81(" + PStr("lr") + PInt(3) + "u}" +
                  PStr("frozen") + "\x88sb.";
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  EXPECT_EQ(r.root->kind, PyKind::kObject);
  EXPECT_EQ(r.root->s, "mylib.config.AttrDict");
  EXPECT_EQ(r.root->entries.size(), 1u);
  ASSERT_NE(r.root->state, nullptr);
  EXPECT_EQ(r.unknown_classes, std::vector<std::string>{"mylib.config.AttrDict"});
}

TEST(PickleTest, TensorRebuildRecordsTheView) {
  std::string p = ::rckpt::testing::PFloatTensor("3", 12, 2, {2, 3}, {1, 2}, "cuda:1") + ".";
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  ASSERT_EQ(r.root->kind, PyKind::kTensor);
  EXPECT_EQ(r.root->tensor.dtype, DType::kF32);
  EXPECT_EQ(r.root->tensor.offset, 2);
  EXPECT_EQ(r.root->tensor.size, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.root->tensor.stride, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.root->tensor.storage->storage.key, "3");
  EXPECT_EQ(r.root->tensor.storage->storage.location, "cuda:1");
}

TEST(PickleTest, AcceptsProtocol4Framing) {
  std::string p = std::string("\x95\x10\x00\x00\x00\x00\x00\x00\x00", 9) + "(\x8c\x01" "a" +
                  "\x94" + "\x8c\x0b" "collections" "\x8c\x0b" "OrderedDict" "\x93)R" + Memo('h', 0) +
                  "\x8f(" + PInt(1) + "\x90" + "t.";
  ASSERT_OK_AND_ASSIGN(PickleResult r, Unpick(p));
  ASSERT_EQ(r.root->kind, PyKind::kTuple);
  ASSERT_EQ(r.root->items.size(), 4u);
  EXPECT_EQ(r.root->items[0]->s, "a");
  EXPECT_EQ(r.root->items[1]->kind, PyKind::kDict);
  EXPECT_EQ(r.root->items[2], r.root->items[0]);  // MEMOIZE + BINGET
  EXPECT_EQ(r.root->items[3]->kind, PyKind::kSet);
  EXPECT_EQ(r.root->items[3]->items.size(), 1u);
}

// --- refusals: never executed, Unsupported ---------------------------------

TEST(PickleRefusalTest, RefusesOsSystem) {
  EXPECT_THAT(Unpick(PGlobal("os", "system") + PStr("echo hi") + "\x85R."),
              StatusIs(StatusCode::kUnsupported, "os.system"));
}

TEST(PickleRefusalTest, RefusesBuiltinsEvalUnderEitherName) {
  EXPECT_THAT(Unpick(PGlobal("__builtin__", "eval") + PStr("1") + "\x85R."),
              StatusIs(StatusCode::kUnsupported, "builtins.eval"));
  EXPECT_THAT(Unpick(PGlobal("builtins", "getattr") + "."),
              StatusIs(StatusCode::kUnsupported, "builtins.getattr"));
}

TEST(PickleRefusalTest, RefusesCodeRunningModulesViaStackGlobal) {
  for (const char* m : {"subprocess", "posix", "nt", "sys", "importlib", "runpy", "pickle",
                        "shutil", "socket", "ctypes", "functools", "operator", "torch.hub",
                        "torch.jit"}) {
    std::string p(1, '\x8c');  // SHORT_BINUNICODE of the module name, then of "run"
    p += static_cast<char>(std::strlen(m));
    p.append(m).append("\x8c\x03run\x93.");
    EXPECT_THAT(Unpick(p), StatusIs(StatusCode::kUnsupported, "refusing global")) << m;
  }
}

TEST(PickleRefusalTest, RefusesTorchFunctionsOutsideTheAllowlist) {
  EXPECT_THAT(Unpick(PGlobal("torch", "load") + PStr("x") + "\x85R."),
              StatusIs(StatusCode::kUnsupported, "torch.load"));
  EXPECT_THAT(Unpick(PGlobal("torch.serialization", "load") + "."),
              StatusIs(StatusCode::kUnsupported, "torch.serialization.load"));
}

TEST(PickleRefusalTest, RefusesCallsOfFunctionsInUnknownModules) {
  // A lower-case callable is a function by convention: calling it is refused,
  // while merely referencing it stays an inert value.
  EXPECT_THAT(Unpick(PGlobal("mylib.helpers", "run_setup") + ")R."),
              StatusIs(StatusCode::kUnsupported, "refusing to call 'mylib.helpers.run_setup'"));
  EXPECT_OK(Unpick(PGlobal("mylib.helpers", "run_setup") + ".").status());
}

TEST(PickleRefusalTest, RefusesCallsOfComputedValues) {
  std::string p = PGlobal("mylib", "Factory") + ")R" + ")R.";
  EXPECT_THAT(Unpick(p), StatusIs(StatusCode::kUnsupported, "computed value"));
}

TEST(PickleRefusalTest, RefusesExtensionRegistryAndOutOfBandBuffers) {
  EXPECT_THAT(Unpick("\x82\x01."), StatusIs(StatusCode::kUnsupported, "EXT"));
  EXPECT_THAT(Unpick("\x97."), StatusIs(StatusCode::kUnsupported, "out-of-band"));
}

TEST(PickleRefusalTest, RefusesNonStoragePersistentIds) {
  EXPECT_THAT(Unpick(Cat({"(", PStr("module"), "tQ."})),
              StatusIs(StatusCode::kUnsupported, "only storages"));
}

TEST(PickleRefusalTest, RefusesUnsupportedTensorKinds) {
  EXPECT_THAT(Unpick(PGlobal("torch._utils", "_rebuild_qtensor") + ")R."),
              StatusIs(StatusCode::kUnsupported, "quantized"));
  EXPECT_THAT(Unpick(Cat({"((", PStr("storage"), PGlobal("torch", "QInt8Storage"), PStr("0"),
                          PStr("cpu"), PInt(1), "tQ."})),
              StatusIs(StatusCode::kUnsupported, "QInt8Storage"));
}

TEST(PickleRefusalTest, StrictRefusesUnknownClasses) {
  std::string p = PGlobal("mylib", "Tracker") + ")\x81.";
  EXPECT_THAT(Unpick(p, /*strict=*/true), StatusIs(StatusCode::kUnsupported, "mylib.Tracker"));
  EXPECT_OK(Unpick(p, /*strict=*/false).status());
}

// --- corruption ---------------------------------------------------------------

TEST(PickleCorruptionTest, RejectsStructuralDamage) {
  struct Case {
    std::string body;
    const char* msg;
  } cases[] = {
      {"", "no STOP"},
      {"K", "truncated"},
      {"X\xff\x00\x00\x00ab.", "truncated"},
      {"a.", "stack underflow"},
      {"\xff.", "unknown opcode"},
      {"h\x05.", "memo index 5 not set"},
      {Cat({"]", PInt(1), PInt(2), "s."}), "SETITEM on a non-dict"},
      {Cat({"}", PInt(1), "a."}), "APPEND on a non-list"},
      {Cat({"}(", PInt(1), "u."}), "odd number"},
      {PInt(1) + PInt(2) + ".", "STOP with 2 values"},
      {"(.", "STOP with 0 values"},
      {"e.", "no MARK"},
      {PInt(1) + PInt(2) + "b.", "BUILD on a value"},
      {Cat({"(", PInt(1), "\x86."}), "stack underflow"},
      {"\x8b\xff\xff\xff\xff.", "negative LONG4"},
      {Cat({"}]", PInt(1), "s."}), "unhashable list"},
      {"c\x01\x02\nx\n.", "invalid name"},
      {"\x80\x09.", "protocol"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Unpick(c.body), StatusIs(StatusCode::kCorruption, c.msg)) << Printable(c.body);
  }
}

TEST(PickleCorruptionTest, EnforcesMemoAndStackLimits) {
  PickleLimits limits;
  limits.max_memo_entries = 2;
  EXPECT_THAT(Unpick(PInt(1) + Memo('q', 0) + Memo('q', 1) + Memo('q', 2) + ".", false, limits),
              StatusIs(StatusCode::kCorruption, "memo exceeds"));
  limits = {};
  limits.max_stack_depth = 3;
  EXPECT_THAT(Unpick(Cat({"(", PInt(1), PInt(2), PInt(3), "l."}), false, limits),
              StatusIs(StatusCode::kCorruption, "stack depth"));
  limits = {};
  limits.max_pickle_bytes = 4;
  EXPECT_THAT(Unpick(PInt(1) + PInt(1) + "0.", false, limits),
              StatusIs(StatusCode::kCorruption, "exceed the limit"));
}

TEST(PickleFuzzTest, MutatedCheckpointPicklesNeverCrash) {
  std::string seed = Cat({"\x80\x02", PGlobal("collections", "OrderedDict"), ")R", Memo('q', 0),
                          "(", PStr("w"), ::rckpt::testing::PFloatTensor("0", 6, 0, {2, 3}, {3, 1}),
                          PStr("n"), "](", PInt(1), "G", std::string(8, '\x01'),
                          "eu}bq\x01h\x01", "0."});
  ASSERT_OK(FuzzUnpickle(AsBytes(seed)));
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string m = seed;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = static_cast<char>(rng()); break;
        case 1: m.erase(at, 1 + rng() % 4); break;
        default: m.insert(at, 1, static_cast<char>(rng())); break;
      }
      if (m.empty()) m.push_back('x');
    }
    (void)FuzzUnpickle(AsBytes(m));  // must return, with any status
  }
}

}  // namespace
}  // namespace rckpt::convert
