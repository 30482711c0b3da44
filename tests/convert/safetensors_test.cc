#include <cstring>
#include <random>

#include "convert/bytes.h"
#include "convert_test_util.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::Fixture;
using ::rckpt::testing::Make;
using ::rckpt::testing::ToBytes;
using ::testing::HasSubstr;
using ::testing::Not;

Checkpoint Rich() {
  Checkpoint ck;
  EXPECT_OK(ck.AddSection("scheduler", Role::kHost));
  EXPECT_OK(ck.AddTensor("model", "model.w", Make(DType::kBF16, {2, 3}, 1)));
  EXPECT_OK(ck.AddTensor("model", "model.e", Make(DType::kF32, {0}, 1)));
  EXPECT_OK(ck.AddTensor("optimizer", "opt.step", Make(DType::kF32, {}, 2), Role::kHost));
  EXPECT_OK(ck.AddTensor("database", "db.x", Make(DType::kU64, {2}, 3)));
  ck.mutable_tensors().back().origin = Device::Cuda(2);
  std::vector<std::byte> cuda(16, std::byte{4});
  EXPECT_OK(ck.AddRng("gen", RngKind::kTorchCuda, cuda, Device::Cuda(1)));
  EXPECT_OK(ck.AddRng("mine", RngKind::kOpaque, std::vector<std::byte>(3, std::byte{9})));
  ck.Tree() = Value::Map({{Value("model"), Value::Map({{Value("w"), Value::TensorRef("model.w")},
                                                       {Value("w2"), Value::TensorRef("model.w")}})},
                          {Value(1), Value::Tuple({Value(2.5), Value::RngRef("gen")})},
                          {Value("obj"), Value::Object("mylib.X", Value::Bytes("\x01"))}});
  ck.Metadata()["format"] = "pt";
  ck.Metadata()["note"] = "h\xc3\xa9";
  return ck;
}

Result<Checkpoint> RoundTrip(const Checkpoint& ck, MemFileSystem* fs) {
  ExportOptions eo;
  eo.fs = fs;
  RCKPT_RETURN_IF_ERROR(ExportSafetensors(ck, "/s/a.safetensors", eo));
  ImportOptions io;
  io.fs = fs;
  return ImportSafetensors("/s/a.safetensors", io);
}

TEST(SafetensorsTest, RoundTripLosesNothing) {
  MemFileSystem fs;
  Checkpoint ck = Rich();
  ASSERT_OK_AND_ASSIGN(Checkpoint back, RoundTrip(ck, &fs));
  ASSERT_EQ(back.tensors().size(), ck.tensors().size());
  for (size_t i = 0; i < ck.tensors().size(); ++i) {
    const TensorEntry& a = ck.tensors()[i];
    const TensorEntry& b = back.tensors()[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.section, a.section);
    EXPECT_EQ(b.role, a.role);
    EXPECT_EQ(b.Origin(), a.Origin());
    EXPECT_EQ(b.tensor.dtype(), a.tensor.dtype());
    EXPECT_EQ(b.tensor.shape(), a.tensor.shape());
    EXPECT_EQ(0, std::memcmp(b.tensor.data(), a.tensor.data(), a.tensor.nbytes()));
  }
  ASSERT_EQ(back.rng().size(), 2u);
  EXPECT_EQ(back.rng()[0].kind, RngKind::kTorchCuda);
  EXPECT_EQ(back.rng()[0].origin, Device::Cuda(1));
  EXPECT_EQ(back.rng()[1].bytes, ck.rng()[1].bytes);
  EXPECT_EQ(back.Tree(), ck.Tree());
  EXPECT_EQ(back.Metadata(), ck.Metadata());
  ASSERT_NE(back.FindSection("scheduler"), nullptr);
  EXPECT_EQ(back.FindSection("scheduler")->role, Role::kHost);
}

TEST(SafetensorsTest, WritesASpecConformingFile) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  ASSERT_OK(ExportSafetensors(Rich(), "/s/a.safetensors", eo));
  const auto& b = *fs.GetFile("/s/a.safetensors");
  uint64_t n = convert::Load64(b.data());
  EXPECT_EQ(n % 8, 0u);                                 // data starts 8-aligned
  EXPECT_EQ(static_cast<char>(b[8]), '{');              // header begins with '{'
  std::string header = ::rckpt::testing::ToString(std::span(b).subspan(8, n));
  EXPECT_EQ(header[header.find_last_not_of(' ')], '}');  // then only spaces
  EXPECT_NE(header.find("\"__metadata__\""), std::string::npos);
  EXPECT_NE(header.find("\"gen\":{\"dtype\":\"U8\",\"shape\":[16]"), std::string::npos);
  EXPECT_NE(header.find("\"rckpt.tree\""), std::string::npos);
}

TEST(SafetensorsTest, ImportsFilesWrittenByTheSafetensorsLibrary) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportSafetensors(Fixture("safetensors/dtypes.safetensors")));
  EXPECT_EQ(ck.Metadata().at("format"), "pt");
  EXPECT_EQ(ck.Metadata().at("note"), "h\xc3\xa9llo");
  ASSERT_NE(ck.FindTensor("bfloat16"), nullptr);
  EXPECT_EQ(ck.FindTensor("bfloat16")->tensor.dtype(), DType::kBF16);
  EXPECT_EQ(ck.FindTensor("float8_e4m3fn")->tensor.dtype(), DType::kF8E4M3FN);
  EXPECT_EQ(ck.FindTensor("uint64")->tensor.dtype(), DType::kU64);
  auto f32 = ck.FindTensor("float32")->tensor.host_span<float>();
  EXPECT_EQ(f32[1], 1.5f);
  EXPECT_EQ(ck.FindTensor("float32")->section, "model");
  EXPECT_EQ(*ck.Tree().Find("float32"), Value::TensorRef("float32"));
}

TEST(SafetensorsTest, PlainFilesGetRngDetectionAndSectionOverrides) {
  ImportOptions o;
  o.section_overrides["layer"] = "loss";
  ASSERT_OK_AND_ASSIGN(Checkpoint ck,
                       ImportSafetensors(Fixture("safetensors/model.safetensors"), o));
  ASSERT_NE(ck.FindRng("torch_rng_state"), nullptr);
  EXPECT_EQ(ck.FindRng("torch_rng_state")->kind, RngKind::kTorchCpu);
  EXPECT_EQ(ck.FindTensor("layer.weight")->section, "loss");
  EXPECT_EQ(ck.FindTensor("scalar")->tensor.shape(), Shape{});
  EXPECT_EQ(ck.FindTensor("empty")->tensor.shape(), (Shape{0, 4}));
}

// The __metadata__ object of a safetensors file, as a plain import sees it.
std::map<std::string, std::string> HeaderMetadata(const std::string& path) {
  Result<Checkpoint> ck = ImportSafetensorsFromBytes(::rckpt::testing::ReadBytes(path));
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  return ck.ok() ? ck->Metadata() : std::map<std::string, std::string>{};
}

std::string HeaderOf(const std::string& path) {
  std::vector<std::byte> b = ::rckpt::testing::ReadBytes(path);
  return ::rckpt::testing::ToString(std::span(b).subspan(8, convert::Load64(b.data())));
}

TEST(SafetensorsTest, PlainModelFileKeepsItsOriginalMetadataThroughRckpt) {
  // A file written by the safetensors library: one section, default roles,
  // no RNG, a flat tree. safetensors -> rckpt -> safetensors adds nothing.
  std::string dir = ::rckpt::testing::NewTempDir("plain");
  const std::string original = Fixture("safetensors/dtypes.safetensors");
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ReadAnyCheckpoint(original));
  ASSERT_OK(WriteAnyCheckpoint(ck, dir + "/m.rckpt"));
  ASSERT_OK_AND_ASSIGN(Checkpoint loaded, ReadAnyCheckpoint(dir + "/m.rckpt"));
  ASSERT_OK(WriteAnyCheckpoint(loaded, dir + "/back.safetensors"));
  EXPECT_EQ(HeaderMetadata(dir + "/back.safetensors"), HeaderMetadata(original));
  EXPECT_EQ(HeaderOf(dir + "/back.safetensors").find("rckpt."), std::string::npos);
  ASSERT_OK_AND_ASSIGN(Checkpoint again, ReadAnyCheckpoint(dir + "/back.safetensors"));
  EXPECT_EQ(again.Tree(), ck.Tree());
  EXPECT_EQ(again.tensors().size(), ck.tensors().size());
}

TEST(SafetensorsTest, ExportKeepsRckptKeysWhenTheyCarrySomething) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  auto header = [&](const Checkpoint& ck) {
    EXPECT_OK(ExportSafetensors(ck, "/s/k.safetensors", eo));
    const auto& b = *fs.GetFile("/s/k.safetensors");
    return ::rckpt::testing::ToString(std::span(b).subspan(8, convert::Load64(b.data())));
  };
  auto flat_model = [] {
    Checkpoint ck;
    EXPECT_OK(ck.AddTensor("model", "w", Make(DType::kF32, {2}, 1)));
    ck.Tree() = Value::Map({{Value("w"), Value::TensorRef("w")}});
    return ck;
  };
  EXPECT_EQ(header(flat_model()).find("rckpt."), std::string::npos);
  Checkpoint nested = flat_model();
  nested.Tree() = Value::Map({{Value("model"), Value::Map({{Value("w"), Value::TensorRef("w")}})}});
  EXPECT_NE(header(nested).find("\"rckpt.tree\""), std::string::npos);
  Checkpoint on_gpu = flat_model();
  on_gpu.mutable_tensors().back().origin = Device::Cuda(1);
  EXPECT_NE(header(on_gpu).find("\"rckpt.tensors\""), std::string::npos);
  Checkpoint other_section = flat_model();
  ASSERT_OK(other_section.AddSection("metrics", Role::kHost));
  EXPECT_NE(header(other_section).find("\"rckpt.sections\""), std::string::npos);
  Checkpoint with_rng = flat_model();
  ASSERT_OK(with_rng.AddRng("gen", RngKind::kOpaque, std::vector<std::byte>(3, std::byte{9})));
  EXPECT_NE(header(with_rng).find("\"rckpt.rng\""), std::string::npos);
  // A U8 tensor a plain import would take for an RNG state keeps the layout.
  Checkpoint rng_named = flat_model();
  ASSERT_OK(rng_named.AddTensor("model", "torch_rng_state", Make(DType::kU8, {5056}, 2)));
  rng_named.Tree().entries().emplace_back(Value("torch_rng_state"),
                                          Value::TensorRef("torch_rng_state"));
  EXPECT_NE(header(rng_named).find("\"rckpt.tensors\""), std::string::npos);
  ASSERT_OK_AND_ASSIGN(Checkpoint back, RoundTrip(rng_named, &fs));
  EXPECT_EQ(back.rng().size(), 0u);
}

TEST(SafetensorsTest, ExportRefusesWhatTheFormatCannotHold) {
  MemFileSystem fs;
  Checkpoint c128;
  ASSERT_OK(c128.AddTensor("model", "z", Make(DType::kC128, {1}, 0)));
  EXPECT_THAT(RoundTrip(c128, &fs), StatusIs(StatusCode::kUnsupported, "c128"));
  Checkpoint reserved;
  reserved.Metadata()["rckpt.tree"] = "x";
  EXPECT_THAT(RoundTrip(reserved, &fs), StatusIs(StatusCode::kInvalidArgument, "reserved"));
  Checkpoint named;
  ASSERT_OK(named.AddTensor("model", "__metadata__", Make(DType::kF32, {1}, 0)));
  EXPECT_THAT(RoundTrip(named, &fs), StatusIs(StatusCode::kInvalidArgument, "__metadata__"));
}

// A file with `header` as its JSON and `data` as its byte buffer.
std::vector<std::byte> File(const std::string& header, const std::string& data = "") {
  std::string s;
  convert::AppendLE(&s, header.size(), 8);
  return ToBytes(s + header + data);
}

TEST(SafetensorsValidationTest, RejectsEachRuleViolation) {
  struct Case {
    std::vector<std::byte> bytes;
    StatusCode code;
    const char* msg;
  } cases[] = {
      {ToBytes("1234"), StatusCode::kCorruption, "shorter than the 8-byte"},
      {File(std::string(10, ' ')).size() ? [] {
         std::string s;
         convert::AppendLE(&s, 100'000'001, 8);
         return ToBytes(s + "{}");
       }() : std::vector<std::byte>{},
       StatusCode::kCorruption, "100000000-byte limit"},
      {[] {
         std::string s;
         convert::AppendLE(&s, 50, 8);
         return ToBytes(s + "{}");
       }(),
       StatusCode::kCorruption, "passes the end"},
      {File("{\"a\": \xff}"), StatusCode::kCorruption, "UTF-8"},
      {File("{\"a\": [}"), StatusCode::kCorruption, "json"},
      {File("[]"), StatusCode::kCorruption, "not a JSON object"},
      {File("{\"__metadata__\": {\"k\": 1}}"), StatusCode::kCorruption, "not a string"},
      {File("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}"), StatusCode::kCorruption,
       "data_offsets"},
      {File("{\"a\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "1234"),
       StatusCode::kCorruption, "unknown dtype"},
      {File("{\"a\": {\"dtype\": \"F8_E8M0\", \"shape\": [1], \"data_offsets\": [0, 1]}}", "1"),
       StatusCode::kUnsupported, "F8_E8M0"},
      {File("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", "1234"),
       StatusCode::kCorruption, "need 8"},
      {File("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", "1234"),
       StatusCode::kCorruption, "shape"},
      {File("{\"a\": {\"dtype\": \"U8\", \"shape\": [4294967296, 4294967296, 4294967296],"
            " \"data_offsets\": [0, 4]}}", "1234"),
       StatusCode::kCorruption, "overflows"},
      {File("{\"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [2, 4]}}", "1234"),
       StatusCode::kCorruption, "a gap"},
      {File("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
            " \"b\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [2, 4]}}", "1234"),
       StatusCode::kCorruption, "an overlap"},
      {File("{\"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2]}}", "1234"),
       StatusCode::kCorruption, "trailing"},
      {File("{\"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2]},"
            " \"a\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [2, 4]}}", "1234"),
       StatusCode::kCorruption, "duplicate"},
      {File("{\"\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", "1234"),
       StatusCode::kUnsupported,
       "safetensors: a tensor has an empty name (\"\" in the header), which rckpt cannot hold"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ImportSafetensorsFromBytes(c.bytes), StatusIs(c.code, c.msg)) << c.msg;
  }
}

TEST(SafetensorsValidationTest, AcceptsPaddingZeroSizeAndScalars) {
  auto ok = File("{\"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]},"
                 " \"e\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [4, 4]}}   ",
                 "abcd");
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportSafetensorsFromBytes(ok));
  EXPECT_EQ(ck.FindTensor("s")->tensor.shape(), Shape{});
  EXPECT_EQ(ck.FindTensor("e")->tensor.nbytes(), 0u);
}

// Rich() exported to safetensors, and where in it rckpt.tensors names
// "model.e" (the 'e' is at + 9), or npos.
std::string ExportedRich(size_t* at) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  *at = std::string::npos;
  Status exported = ExportSafetensors(Rich(), "/s/a.safetensors", eo);
  EXPECT_OK(exported);
  if (!exported.ok()) return "";
  std::string s = ::rckpt::testing::ToString(*fs.GetFile("/s/a.safetensors"));
  *at = s.find("[\\\"model.e\\\"");
  return s;
}

TEST(SafetensorsValidationTest, RejectsTamperedRckptMetadata) {
  size_t at = 0;
  std::string s = ExportedRich(&at);
  ASSERT_NE(at, std::string::npos);
  s[at + 9] = 'X';  // rckpt.tensors now names "model.X"
  EXPECT_THAT(ImportSafetensorsFromBytes(ToBytes(s)),
              StatusIs(StatusCode::kCorruption, "rckpt metadata"));
}

// A control byte in the tampered layout is quoted once as \x01, keeping the
// message one line.
TEST(SafetensorsValidationTest, RckptMetadataMessageQuotesAControlByteOnce) {
  size_t at = 0;
  std::string s = ExportedRich(&at);
  ASSERT_NE(at, std::string::npos);
  // The header's JSON string holds the layout's JSON: \\u0001 there is a
  // U+0001 in the name. The header grows by 6 bytes.
  s.replace(at + 9, 1, "\\\\u0001");
  uint64_t header = 0;
  std::memcpy(&header, s.data(), 8);
  header += 6;
  std::memcpy(s.data(), &header, 8);
  Result<Checkpoint> r = ImportSafetensorsFromBytes(ToBytes(s));
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("rckpt metadata"));
  EXPECT_THAT(r.status().message(), HasSubstr("model.\\x01"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("\\x5c")));
}

TEST(SafetensorsValidationTest, EveryTruncationIsRejected) {
  auto bytes = ::rckpt::testing::ReadBytes(Fixture("safetensors/model.safetensors"));
  for (size_t n = 0; n < bytes.size(); n += 5) {
    EXPECT_FALSE(ImportSafetensorsFromBytes(std::span(bytes.data(), n)).ok()) << n;
  }
}

TEST(FormatDetectionTest, SniffsContentAndExtension) {
  EXPECT_EQ(*DetectFormat(Fixture("pytorch/tied.pt")), CheckpointFormat::kPyTorch);
  EXPECT_EQ(*DetectFormat(Fixture("safetensors/dtypes.safetensors")),
            CheckpointFormat::kSafetensors);
  EXPECT_EQ(FormatFromExtension("a/b.PTH"), CheckpointFormat::kPyTorch);
  EXPECT_EQ(FormatFromExtension("a/b.rckpt"), CheckpointFormat::kRckpt);
  EXPECT_EQ(FormatFromExtension("a/b.txt"), CheckpointFormat::kUnknown);
}

TEST(FormatDetectionTest, ReadAnyAndWriteAnyRoundTripThroughRckpt) {
  std::string dir = ::rckpt::testing::NewTempDir("convert");
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ReadAnyCheckpoint(Fixture("pytorch/cuda_tagged.pt")));
  ASSERT_OK(WriteAnyCheckpoint(ck, dir + "/c.rckpt"));
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadAnyCheckpoint(dir + "/c.rckpt", {}, &report));
  EXPECT_EQ(report.format, "rckpt");
  EXPECT_EQ(back.FindTensor("on_cuda1")->Origin(), Device::Cuda(1));
  EXPECT_TRUE(back.FindTensor("on_cuda1")->tensor.device().is_cpu());
  EXPECT_EQ(back.Tree(), ck.Tree());
  EXPECT_THAT(WriteAnyCheckpoint(ck, dir + "/c.txt"),
              StatusIs(StatusCode::kInvalidArgument, "unknown extension"));
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(SafetensorsFuzzTest, MutatedFilesNeverCrash) {
  MemFileSystem fs;
  ExportOptions eo;
  eo.fs = &fs;
  ASSERT_OK(ExportSafetensors(Rich(), "/s/a.safetensors", eo));
  for (const std::vector<std::byte>& seed :
       {*fs.GetFile("/s/a.safetensors"),
        ::rckpt::testing::ReadBytes(Fixture("safetensors/model.safetensors"))}) {
    std::mt19937 rng(11);
    for (int i = 0; i < 3000; ++i) {
      std::vector<std::byte> m = seed;
      for (int e = 0, n = 1 + rng() % 4; e < n; ++e) {
        // Mostly the header, where the parsing happens.
        size_t limit = std::min<size_t>(m.size(), 8 + convert::Load64(seed.data()));
        m[rng() % limit] = static_cast<std::byte>(rng());
      }
      (void)ImportSafetensorsFromBytes(m);
    }
  }
}

}  // namespace
}  // namespace rckpt
