// NumPy values inside torch.save files: arrays, scalars and generator states
// as NumPy 1 and NumPy 2 pickle them (fixtures by
// tests/data/pytorch/make_numpy_fixtures.py), hand-built damaged pickles
// (one case per corruption class), and the export back to NumPy's pickles.
#include <cmath>
#include <cstring>

#include "convert/bytes.h"
#include "convert/numpy_pickle.h"
#include "convert/zip.h"
#include "convert_test_util.h"
#include "core/rng_layout.h"
#include "io/mem_file.h"
#include "rckpt/convert.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::Fixture;
using ::rckpt::testing::MakeArchive;
using ::rckpt::testing::PGlobal;
using ::rckpt::testing::PStr;
using ::rckpt::testing::ReadBytes;
using ::testing::HasSubstr;
using namespace std::string_literals;

const Value* At(const Value& v, std::initializer_list<const char*> keys) {
  const Value* cur = &v;
  for (const char* k : keys) {
    cur = cur != nullptr && cur->is_map() ? cur->Find(std::string_view(k)) : nullptr;
  }
  return cur;
}

template <typename T>
std::vector<T> Elements(const Checkpoint& ck, const std::string& name) {
  const TensorEntry* t = ck.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  auto s = t->tensor.host_span<T>();
  return {s.begin(), s.end()};
}

// The (dtype name, tensor name) of a numpy.ndarray value.
std::pair<std::string, std::string> Array(const Value* v) {
  EXPECT_NE(v, nullptr);
  if (v == nullptr || v->kind() != ValueKind::kObject || v->as_string() != "numpy.ndarray") {
    ADD_FAILURE() << (v ? v->DebugString(200) : "null") << " is no numpy.ndarray";
    return {};
  }
  return {v->fields().Find(std::string_view("dtype"))->as_string(),
          v->fields().Find(std::string_view("data"))->as_string()};
}

// The value of a numpy.scalar, checking its dtype name.
Value Scalar(const Value* v, const std::string& dtype) {
  EXPECT_NE(v, nullptr);
  if (v == nullptr || v->kind() != ValueKind::kObject || v->as_string() != "numpy.scalar") {
    ADD_FAILURE() << (v ? v->DebugString(200) : "null") << " is no numpy.scalar";
    return Value();
  }
  EXPECT_EQ(v->fields().Find(std::string_view("dtype"))->as_string(), dtype);
  return *v->fields().Find(std::string_view("value"));
}

class NumpyFixtureTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const std::string f = "pytorch/numpy_values_np" + std::to_string(GetParam()) + ".pt";
    auto ck = ImportPyTorch(Fixture(f), {}, &report_);
    ASSERT_OK(ck.status());
    ck_ = std::move(ck).value();
  }
  const Value& Tree() const { return ck_.Tree(); }

  Checkpoint ck_;
  ImportReport report_;
};

TEST_P(NumpyFixtureTest, ArraysBecomeTheValuesRckptSaveWrites) {
  EXPECT_EQ(Array(At(Tree(), {"arrays", "u32"})),
            (std::pair<std::string, std::string>{"uint32", "arrays.u32"}));
  const TensorEntry* u32 = ck_.FindTensor("arrays.u32");
  ASSERT_NE(u32, nullptr);
  EXPECT_EQ(u32->tensor.dtype(), DType::kI32);  // as rckpt.save stores uint32
  EXPECT_EQ(u32->tensor.shape(), (Shape{624}));
  EXPECT_EQ(u32->section, "arrays");
  auto w = Elements<int32_t>(ck_, "arrays.u32");
  EXPECT_EQ(static_cast<uint32_t>(w[5]), 5u * 6700417u);

  EXPECT_EQ(Array(At(Tree(), {"arrays", "f64"})).first, "float64");
  EXPECT_EQ(ck_.FindTensor("arrays.f64")->tensor.shape(), (Shape{2, 3}));
  auto f64 = Elements<double>(ck_, "arrays.f64");
  EXPECT_EQ(f64[1], -1.25);
  EXPECT_TRUE(std::isinf(f64[4]));
  EXPECT_TRUE(std::signbit(f64[5]));
  EXPECT_EQ(Elements<int8_t>(ck_, "arrays.i8"), (std::vector<int8_t>{-128, 0, 127}));
  EXPECT_EQ(ck_.FindTensor("arrays.bool")->tensor.dtype(), DType::kBool);
  EXPECT_EQ(ck_.FindTensor("arrays.f16")->tensor.dtype(), DType::kF16);
  // Big-endian elements come back in the host's order, Fortran order in C order.
  EXPECT_EQ(Array(At(Tree(), {"arrays", "big_i4"})).first, "int32");
  EXPECT_EQ(Elements<int32_t>(ck_, "arrays.big_i4"), (std::vector<int32_t>{1, -2, 300000}));
  EXPECT_EQ(Elements<int64_t>(ck_, "arrays.fortran"), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ck_.FindTensor("arrays.zero_d")->tensor.shape(), Shape{});
  EXPECT_EQ(Elements<float>(ck_, "arrays.zero_d"), (std::vector<float>{2.5f}));
  EXPECT_EQ(ck_.FindTensor("arrays.empty")->tensor.shape(), (Shape{0, 3}));
  EXPECT_EQ(Array(At(Tree(), {"arrays", "dt"})).first, "datetime64[ns]");
  EXPECT_EQ(Elements<int64_t>(ck_, "arrays.dt"), (std::vector<int64_t>{1704067200000000001, 0}));
  EXPECT_EQ(Array(At(Tree(), {"arrays", "td"})).first, "timedelta64[25s]");
  // long double: its bytes, the item size as the last dimension.
  EXPECT_EQ(Array(At(Tree(), {"arrays", "ld"})).first, "float128");
  EXPECT_EQ(ck_.FindTensor("arrays.ld")->tensor.shape(), (Shape{2, 16}));
  EXPECT_EQ(ck_.FindTensor("arrays.ld")->tensor.dtype(), DType::kU8);
  auto c128 = Elements<double>(ck_, "arrays.big_c128");
  EXPECT_EQ(c128, (std::vector<double>{3, -4}));
  auto u64 = Elements<int64_t>(ck_, "arrays.u64");
  EXPECT_EQ(static_cast<uint64_t>(u64[1]), ~0ull);
  EXPECT_EQ(Elements<int16_t>(ck_, "arrays.u16")[0], -1);
  // One array under two keys: one tensor, referenced twice.
  EXPECT_EQ(Array(At(Tree(), {"arrays", "shared_b"})).second, "arrays.shared_a");
  EXPECT_EQ(ck_.FindTensor("arrays.shared_b"), nullptr);
}

TEST_P(NumpyFixtureTest, ScalarsBecomeTheValuesRckptSaveWrites) {
  const Value& s = *At(Tree(), {"scalars"});
  EXPECT_EQ(Scalar(At(s, {"f64"}), "float64"), Value(0.1));
  EXPECT_EQ(Scalar(At(s, {"i64"}), "int64"), Value(int64_t{-7}));
  // 2^64 - 1: a big integer, as Python's int.
  EXPECT_EQ(Scalar(At(s, {"u64"}), "uint64"),
            Value::BigInt(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00", 9)));
  EXPECT_EQ(Scalar(At(s, {"u8"}), "uint8"), Value(int64_t{200}));
  EXPECT_EQ(Scalar(At(s, {"bool"}), "bool"), Value(true));
  EXPECT_EQ(Scalar(At(s, {"f16"}), "float16"), Value(1.5));
  EXPECT_EQ(Scalar(At(s, {"f32"}), "float32"), Value(static_cast<double>(0.1f)));
  EXPECT_EQ(Scalar(At(s, {"c64"}), "complex64"), Value::Tuple({Value(1.0), Value(2.0)}));
  EXPECT_EQ(Scalar(At(s, {"date"}), "datetime64[D]"), Value(int64_t{19723}));
  EXPECT_EQ(Scalar(At(s, {"str"}), "str"), Value("h\xc3\xa9llo"));
  EXPECT_EQ(Scalar(At(s, {"bytes"}), "bytes"), Value::Bytes("ab"));
  EXPECT_EQ(Scalar(At(s, {"ld"}), "float128").kind(), ValueKind::kBytes);
}

TEST_P(NumpyFixtureTest, OtherNumpyValuesStayInert) {
  const std::string np = GetParam() == 1 ? "numpy.core" : "numpy._core";
  for (const char* key : {"text", "objects", "matrix", "records"}) {
    const Value* v = At(Tree(), {"inert", key});
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->kind(), ValueKind::kObject) << key;
    EXPECT_EQ(v->as_string(), np + ".multiarray._reconstruct") << key;
  }
  EXPECT_EQ(At(Tree(), {"inert", "dtype"})->as_string(), "numpy.dtype");
  EXPECT_THAT(report_.inert_classes, ::testing::Contains(np + ".multiarray._reconstruct"));
  EXPECT_THAT(report_.inert_classes, ::testing::Contains("numpy.dtype"));
}

TEST_P(NumpyFixtureTest, GeneratorStatesBecomeNumpyRecords) {
  const std::pair<const char*, uint32_t> states[] = {
      {"rng.numpy", 1}, {"rng.mt19937", 2}, {"rng.pcg64", 3},
      {"rng.pcg64dxsm", 4}, {"rng.sfc64", 5}, {"rng.philox", 6}};
  for (const auto& [name, tag] : states) {
    const RngRecord* r = ck_.FindRng(name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->kind, RngKind::kNumpy);
    EXPECT_OK(ValidateNumpyRng(r->bytes));
    EXPECT_EQ(FindNumpyRngLayout(r->bytes)->tag, tag) << name;
  }
  // The record keeps the name it was read under, and the tree refers to it.
  EXPECT_EQ(*At(Tree(), {"rng", "numpy"}), Value::RngRef("rng.numpy"));
  // np.random.seed(7) then one standard_normal(): position 624 (a fresh
  // block was not needed), a cached Gaussian.
  const auto& legacy = ck_.FindRng("rng.numpy")->bytes;
  EXPECT_EQ(convert::Load32(legacy.data() + 2504), 1u);  // has_gauss
  // Philox and the others left a buffered 32-bit half.
  EXPECT_EQ(convert::Load32(ck_.FindRng("rng.philox")->bytes.data() + 88), 1u);
  // get_state(legacy=False) is no bit generator's state: it stays data.
  EXPECT_EQ(ck_.FindRng("rng.legacy_dict"), nullptr);
  EXPECT_EQ(Array(At(Tree(), {"rng", "legacy_dict", "state", "key"})).first, "uint32");
}

TEST_P(NumpyFixtureTest, RecordsTheModuleNumpysGlobalsCameFrom) {
  EXPECT_EQ(ck_.Metadata().at("rckpt.numpy_module"),
            GetParam() == 1 ? "numpy.core" : "numpy._core");
}

TEST_P(NumpyFixtureTest, ReadsPickleProtocolFiveArrays) {
  const std::string f = "pytorch/numpy_protocol5_np" + std::to_string(GetParam()) + ".pt";
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorch(Fixture(f)));
  EXPECT_EQ(Array(At(ck.Tree(), {"f32"})).first, "float32");
  EXPECT_EQ(Elements<float>(ck, "f32"), (std::vector<float>{1, 2}));
  EXPECT_EQ(Elements<int16_t>(ck, "fortran"), (std::vector<int16_t>{0, 1, 2, 3, 4, 5}));
}

// Export writes NumPy's pickles back, with the module names of the file the
// checkpoint came from; a re-import gives the same checkpoint.
TEST_P(NumpyFixtureTest, ExportWritesNumpysPicklesBack) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  eo.drop_objects = true;  // the inert values
  ASSERT_OK(ExportPyTorch(ck_, "/x/back.pt", eo));
  ImportOptions io;
  io.fs = &fs;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ImportPyTorch("/x/back.pt", io));
  EXPECT_EQ(*At(back.Tree(), {"arrays"}), *At(Tree(), {"arrays"}));
  EXPECT_EQ(*At(back.Tree(), {"scalars"}), *At(Tree(), {"scalars"}));
  EXPECT_EQ(*At(back.Tree(), {"rng"}), *At(Tree(), {"rng"}));
  ASSERT_EQ(back.tensors().size(), ck_.tensors().size());
  for (size_t i = 0; i < ck_.tensors().size(); ++i) {
    const TensorEntry& a = ck_.tensors()[i];
    const TensorEntry& b = back.tensors()[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.section, a.section);
    EXPECT_EQ(b.tensor.dtype(), a.tensor.dtype()) << a.name;
    EXPECT_EQ(b.tensor.shape(), a.tensor.shape()) << a.name;
    EXPECT_TRUE(std::equal(a.tensor.host_bytes().begin(), a.tensor.host_bytes().end(),
                           b.tensor.host_bytes().begin(), b.tensor.host_bytes().end()))
        << a.name;
  }
  ASSERT_EQ(back.rng().size(), ck_.rng().size());
  for (size_t i = 0; i < ck_.rng().size(); ++i) {
    EXPECT_EQ(back.rng()[i].name, ck_.rng()[i].name);
    EXPECT_EQ(back.rng()[i].bytes, ck_.rng()[i].bytes) << ck_.rng()[i].name;
  }
  EXPECT_EQ(back.Metadata(), ck_.Metadata());
  // The pickle names NumPy's globals as the source file did.
  const std::vector<std::byte>* bytes = fs.GetFile("/x/back.pt");
  ASSERT_NE(bytes, nullptr);
  const std::string text = testing::ToString(*bytes);
  const bool np2 = text.find("numpy._core.multiarray\n_reconstruct") != std::string::npos;
  const bool np1 = text.find("numpy.core.multiarray\n_reconstruct") != std::string::npos;
  EXPECT_EQ(np2, GetParam() == 2);
  EXPECT_EQ(np1, GetParam() == 1);
}

INSTANTIATE_TEST_SUITE_P(NumpyMajors, NumpyFixtureTest, ::testing::Values(1, 2),
                         [](const auto& info) { return "numpy" + std::to_string(info.param); });

// --- hand-built pickles: one case per way NumPy's state can be damaged -------

std::string PBytes(std::string_view b) {  // SHORT_BINBYTES / BINBYTES
  std::string out;
  if (b.size() < 256) {
    out = "C" + std::string(1, static_cast<char>(b.size()));
  } else {
    out = "B";
    convert::AppendLE(&out, b.size(), 4);
  }
  return out + std::string(b);
}

std::string PDType(const std::string& type, const std::string& order = "<",
                  const std::string& tail = "") {
  return PGlobal("numpy", "dtype") + PStr(type) + "\x89\x88\x87R(K\x03" + PStr(order) +
         "NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00"s + tail + "tb";
}

std::string PShape(std::initializer_list<int> dims) {
  std::string s = "(";
  for (int d : dims) {
    s += 'K';
    s += static_cast<char>(d);
  }
  return s + "t";
}

// _reconstruct(ndarray, (0,), b'b') + BUILD (1, shape, dtype, fortran, data).
std::string PArray(const std::string& shape, const std::string& dtype, const std::string& data,
                  const std::string& fortran = "\x89") {
  return PGlobal("numpy.core.multiarray", "_reconstruct") + PGlobal("numpy", "ndarray") +
         "K\x00\x85"s + PBytes("b") + "\x87R(K\x01" + shape + dtype + fortran + data + "tb";
}

Result<Checkpoint> ImportValue(const std::string& value, ImportReport* report = nullptr) {
  const std::string pkl = "\x80\x02}" + PStr("v") + value + "s.";
  const std::string archive = MakeArchive(pkl, {});
  return ImportPyTorchFromBytes(convert::AsBytes(archive), {}, report);
}

TEST(NumpyPickleTest, HandBuiltArrayImports) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck,
                       ImportValue(PArray(PShape({2}), PDType("u2"), PBytes("\x01\x00\xff\xff"s))));
  EXPECT_EQ(Array(At(ck.Tree(), {"v"})).first, "uint16");
  EXPECT_EQ(Elements<int16_t>(ck, "v"), (std::vector<int16_t>{1, -1}));
}

TEST(NumpyPickleTest, RejectsAByteCountOtherThanShapeTimesItemSize) {
  EXPECT_THAT(ImportValue(PArray(PShape({3}), PDType("u2"), PBytes("\x01\x00\xff\xff"s))),
              StatusIs(StatusCode::kCorruption,
                       "at 'v': pickle: NumPy array of dtype uint16 and 3 elements holds 4 "
                       "bytes, expected 3 x 2"));
}

TEST(NumpyPickleTest, RejectsAShapeThatIsNotATupleOfInts) {
  EXPECT_THAT(ImportValue(PArray(PStr("x"), PDType("u1"), PBytes(""))),
              StatusIs(StatusCode::kCorruption, "array shape is not a tuple"));
  EXPECT_THAT(ImportValue(PArray("(J\xff\xff\xff\xfft", PDType("u1"), PBytes(""))),
              StatusIs(StatusCode::kCorruption, "int >= 0"));
}

TEST(NumpyPickleTest, RejectsAShapeWhoseSizeOverflows) {
  const std::string big = "\x8a\x08" + std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8);
  EXPECT_THAT(ImportValue(PArray("(" + big + big + "t", PDType("u1"), PBytes(""))),
              StatusIs(StatusCode::kCorruption, "array size overflows"));
}

TEST(NumpyPickleTest, RejectsADTypeNumpyDoesNotHave) {
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("f3"), PBytes("abc"))),
              StatusIs(StatusCode::kCorruption, "dtype 'f3' does not exist"));
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("i"), PBytes("abc"))),
              StatusIs(StatusCode::kCorruption, "dtype 'i' does not exist"));
}

TEST(NumpyPickleTest, RejectsAMalformedDTypeState) {
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("u1", "?"), PBytes("a"))),
              StatusIs(StatusCode::kCorruption, "byte order is not one of"));
  const std::string short_state = PGlobal("numpy", "dtype") + PStr("u1") +
                                   "\x89\x88\x87R(K\x03" + PStr("|") + "tb";
  EXPECT_THAT(ImportValue(PArray(PShape({1}), short_state, PBytes("a"))),
              StatusIs(StatusCode::kCorruption, "state is not (3, order, ...)"));
  const std::string no_type = PGlobal("numpy", "dtype") + "K\x01\x85R";
  EXPECT_THAT(ImportValue(PArray(PShape({1}), no_type, PBytes("a"))),
              StatusIs(StatusCode::kCorruption, "dtype without a type string"));
}

TEST(NumpyPickleTest, RejectsADatetimeWithoutAUnit) {
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("M8"), PBytes("12345678"))),
              StatusIs(StatusCode::kCorruption, "no readable datetime unit"));
}

TEST(NumpyPickleTest, RejectsDataThatIsNotBytes) {
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("u1"), PStr("a"))),
              StatusIs(StatusCode::kCorruption, "holds its data as something other than bytes"));
}

TEST(NumpyPickleTest, RejectsAFortranFlagThatIsNotABool) {
  EXPECT_THAT(ImportValue(PArray(PShape({1}), PDType("u1"), PBytes("a"), "K\x07")),
              StatusIs(StatusCode::kCorruption, "is_fortran is not a bool"));
}

TEST(NumpyPickleTest, RejectsAnArrayWithoutItsState) {
  const std::string bare = PGlobal("numpy.core.multiarray", "_reconstruct") +
                           PGlobal("numpy", "ndarray") + "K\x00\x85"s + PBytes("b") + "\x87R";
  EXPECT_THAT(ImportValue(bare), StatusIs(StatusCode::kCorruption, "array state is not"));
  const std::string no_class =
      PGlobal("numpy._core.multiarray", "_reconstruct") + "K\x00\x85R"s;
  EXPECT_THAT(ImportValue(no_class), StatusIs(StatusCode::kCorruption, "without a class"));
}

TEST(NumpyPickleTest, RejectsAScalarOfTheWrongSize) {
  const std::string scalar =
      PGlobal("numpy.core.multiarray", "scalar") + PDType("f8") + PBytes("1234") + "\x86R";
  EXPECT_THAT(ImportValue(scalar),
              StatusIs(StatusCode::kCorruption, "scalar of dtype float64 does not hold 8 bytes"));
}

TEST(NumpyPickleTest, RejectsAMalformedFrombuffer) {
  const std::string fb = PGlobal("numpy.core.numeric", "_frombuffer");
  EXPECT_THAT(ImportValue(fb + "(" + PBytes("ab") + PDType("u1") + PShape({2}) + PStr("K") + "tR"),
              StatusIs(StatusCode::kCorruption, "order is not 'C' or 'F'"));
  EXPECT_THAT(ImportValue(fb + "(" + PBytes("ab") + "tR"),
              StatusIs(StatusCode::kCorruption, "_frombuffer without 4 arguments"));
}

TEST(NumpyPickleTest, ASubclassOfNdarrayStaysInert) {
  const std::string matrix = PGlobal("numpy.core.multiarray", "_reconstruct") +
                             PGlobal("numpy.matrixlib.defmatrix", "matrix") + "K\x00\x85"s +
                             PBytes("b") + "\x87R(K\x01" + PShape({1, 1}) + PDType("u1", "|") +
                             "\x89" + PBytes("a") + "tb";
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportValue(matrix, &report));
  EXPECT_EQ(At(ck.Tree(), {"v"})->as_string(), "numpy.core.multiarray._reconstruct");
  EXPECT_TRUE(ck.tensors().empty());
}

// get_state()'s tuple: ('MT19937', key, pos, has_gauss, gauss).
std::string LegacyState(int pos, int words = 624) {
  const std::string key_shape = "(M" + std::string(1, static_cast<char>(words & 0xff)) +
                                std::string(1, static_cast<char>(words >> 8)) + "t";
  return "(" + PStr("MT19937") +
         PArray(key_shape, PDType("u4"), PBytes(std::string(4 * words, '\x01'))) + "M" +
         std::string(1, static_cast<char>(pos & 0xff)) +
         std::string(1, static_cast<char>(pos >> 8)) + "K\x01G" + std::string(8, '\x00') + "t";
}

TEST(NumpyPickleTest, ALegacyStateBecomesARecordUnderItsKey) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportValue(LegacyState(624)));
  const RngRecord* r = ck.FindRng("v");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, RngKind::kNumpy);
  EXPECT_EQ(convert::Load32(r->bytes.data()), 1u);
  EXPECT_EQ(convert::Load32(r->bytes.data() + 4), 0x01010101u);
  EXPECT_EQ(convert::Load32(r->bytes.data() + 2500), 624u);
}

TEST(NumpyPickleTest, AStateNumpyWouldNotGiveStaysDataWithAWarning) {
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportValue(LegacyState(625), &report));
  EXPECT_EQ(ck.FindRng("v"), nullptr);
  EXPECT_EQ(At(ck.Tree(), {"v"})->kind(), ValueKind::kTuple);
  EXPECT_THAT(report.warnings,
              ::testing::Contains(HasSubstr("'v' looks like NumPy's RandomState.get_state() but "
                                            "its '2' is outside 0..624")));
  ASSERT_OK_AND_ASSIGN(ck, ImportValue(LegacyState(3, 623), &report));
  EXPECT_EQ(ck.FindRng("v"), nullptr);  // 623 words
  EXPECT_THAT(report.warnings, ::testing::Contains(HasSubstr("is not a uint32 array of 624")));
}

}  // namespace
}  // namespace rckpt
