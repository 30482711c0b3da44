// The PyTorch (zip + pickle) and safetensors readers reject broken and
// hostile input with their documented code and a one-line message, never
// crash, and never allocate what a file merely claims. Complements
// tests/convert/, which covers each reader's rule-by-rule validation.
#include <filesystem>
#include <fstream>
#include <string_view>

#include "convert/zip.h"
#include "reliability/child_process.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt::reliability {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> Bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::vector<std::byte> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Bytes(s);
}

void WriteFile(const std::string& path, std::span<const std::byte> b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

// A little-endian u64 as bytes.
std::string U64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string BinUnicode(std::string_view s) {
  std::string out = "X";
  out += U64(s.size()).substr(0, 4);
  out += s;
  return out;
}

// A protocol-2 pickle of {'w': tensor} whose FloatStorage claims `numel`
// elements and whose view has `size` elements, as torch.save writes it.
std::string TensorPickle(uint64_t numel, uint64_t size) {
  std::string p = "\x80\x02}";
  p += BinUnicode("w");
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += '(';
  p += BinUnicode("storage");
  p += "ctorch\nFloatStorage\n";
  p += BinUnicode("0");
  p += BinUnicode("cpu");
  p += "\x8a\x08";
  p += U64(numel);
  p += "tQ";
  p += std::string("K\x00", 2) + "\x8a\x08" + U64(size) + "\x85";  // offset, size
  p += "K\x01\x85\x89";                                              // stride, requires_grad
  p += "ccollections\nOrderedDict\n)Rt";
  p += "Rs.";
  return p;
}

// A torch.save-style archive holding `pickle` and a 16-byte storage "0".
std::vector<std::byte> Archive(std::string_view pickle) {
  MemFileSystem mem;
  auto out = *mem.OpenForWrite("/a.pt");
  convert::ZipWriter zip(out.get(), 64);
  EXPECT_OK(zip.Add("archive/data.pkl", Bytes(pickle)));
  EXPECT_OK(zip.Add("archive/byteorder", Bytes("little")));
  EXPECT_OK(zip.Add("archive/data/0", std::vector<std::byte>(16)));
  EXPECT_OK(zip.Add("archive/version", Bytes("3\n")));
  EXPECT_OK(zip.Finish());
  EXPECT_OK(out->Close());
  return *mem.GetFile("/a.pt");
}

std::vector<std::byte> Safetensors(std::string_view header, size_t data_bytes) {
  std::string s = U64(header.size()) + std::string(header) + std::string(data_bytes, '\0');
  return Bytes(s);
}

// Every outcome of a reader on damaged input: OK (the damage hit bytes no
// check covers) or one of `codes`, with a one-line message.
void ExpectCleanOutcome(const Status& s, std::initializer_list<StatusCode> codes,
                        const std::string& what) {
  if (s.ok()) return;
  EXPECT_THAT(codes, ::testing::Contains(s.code())) << what << ": " << s.ToString();
  EXPECT_FALSE(s.message().empty()) << what;
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << what << ": " << s.ToString();
}

const std::string kLfsPointer =
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 1234567890\n";

TEST(ForeignInputTest, HandBuiltArchiveImports) {
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, ImportPyTorchFromBytes(Archive(TensorPickle(4, 4))));
  ASSERT_EQ(ck.tensors().size(), 1u);
  EXPECT_EQ(ck.tensors()[0].tensor.nbytes(), 16u);
}

TEST(ForeignInputTest, EveryReaderRejectsADirectory) {
  const std::string dir = testing::NewTempDir("dir-input");
  EXPECT_THAT(Load(dir).status(), StatusIs(StatusCode::kInvalidArgument, dir));
  EXPECT_THAT(ImportPyTorch(dir).status(), StatusIs(StatusCode::kInvalidArgument, dir));
  EXPECT_THAT(ImportSafetensors(dir).status(), StatusIs(StatusCode::kInvalidArgument, dir));
  EXPECT_THAT(ReadAnyCheckpoint(dir).status(), StatusIs(StatusCode::kInvalidArgument, dir));
  fs::remove_all(dir);
}

TEST(ForeignInputTest, PyTorchReaderRejectsEmptyLfsPointerAndForeignBytes) {
  for (const std::string& input : {std::string(), kLfsPointer, std::string(4096, 'x'),
                                   std::string("PK\x05\x06", 4) + std::string(18, '\0')}) {
    const Status s = ImportPyTorchFromBytes(Bytes(input)).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    ExpectCleanOutcome(s, {StatusCode::kCorruption}, "pytorch input of " +
                                                         std::to_string(input.size()) + " bytes");
  }
  EXPECT_THAT(ImportPyTorchFromBytes(Bytes(kLfsPointer)).status(),
              StatusIs(StatusCode::kCorruption, "Git LFS"));
}

TEST(ForeignInputTest, SafetensorsReaderRejectsEmptyLfsPointerAndForeignBytes) {
  for (const std::string& input : {std::string(), std::string("\x10", 1), kLfsPointer,
                                   std::string(4096, 'x'), std::string("PK\x03\x04", 4)}) {
    const Status s = ImportSafetensorsFromBytes(Bytes(input)).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    ExpectCleanOutcome(s, {StatusCode::kCorruption}, "safetensors input");
  }
  EXPECT_THAT(ImportSafetensorsFromBytes(Bytes(kLfsPointer)).status(),
              StatusIs(StatusCode::kCorruption, "Git LFS"));
}

TEST(ForeignInputTest, PyTorchBitFlipAnywhereIsOkOrRejectedCleanly) {
  const auto good = ReadFile(std::string(RCKPT_TEST_DATA_DIR) + "/pytorch/zero_d_empty.pt");
  ASSERT_FALSE(good.empty());
  ImportOptions strict_crc;
  strict_crc.require_crc32 = true;
  ASSERT_OK(ImportPyTorchFromBytes(good, strict_crc).status());
  for (size_t i = 0; i < good.size(); ++i) {
    auto b = good;
    b[i] ^= std::byte{static_cast<uint8_t>(1u << (i % 8))};
    ExpectCleanOutcome(ImportPyTorchFromBytes(b, strict_crc).status(),
                       {StatusCode::kCorruption, StatusCode::kUnsupported},
                       "bit flip at byte " + std::to_string(i));
  }
}

TEST(ForeignInputTest, SafetensorsBitFlipAnywhereIsOkOrRejectedCleanly) {
  Checkpoint ck;
  std::vector<std::byte> bytes(64, std::byte{3});
  ASSERT_OK(ck.AddTensor("model", "w", *Tensor::FromBytes(DType::kF32, {4, 4}, bytes)));
  ASSERT_OK(ck.AddTensor("optimizer", "m", *Tensor::FromBytes(DType::kBF16, {8}, {bytes.data(), 16})));
  ck.Tree()["epoch"] = 2;
  MemFileSystem mem;
  ExportOptions o;
  o.fs = &mem;
  ASSERT_OK(ExportSafetensors(ck, "/a.safetensors", o));
  const auto good = *mem.GetFile("/a.safetensors");
  ASSERT_OK(ImportSafetensorsFromBytes(good).status());
  for (size_t i = 0; i < good.size(); ++i) {
    auto b = good;
    b[i] ^= std::byte{static_cast<uint8_t>(1u << (i % 8))};
    ExpectCleanOutcome(ImportSafetensorsFromBytes(b).status(),
                       {StatusCode::kCorruption, StatusCode::kUnsupported},
                       "bit flip at byte " + std::to_string(i));
  }
}

TEST(ForeignInputTest, SafetensorsRckptLayoutWithABadDeviceIsCorruption) {
  // A damaged origin device in the rckpt.* metadata is a damaged file
  // (Corruption), not a bad argument of the caller's.
  Checkpoint ck;
  std::vector<std::byte> bytes(16, std::byte{1});
  ASSERT_OK(ck.AddTensor("model", "w", *Tensor::FromBytes(DType::kF32, {4}, bytes)));
  MemFileSystem mem;
  ExportOptions o;
  o.fs = &mem;
  ASSERT_OK(ExportSafetensors(ck, "/a.safetensors", o));
  auto b = *mem.GetFile("/a.safetensors");
  std::string text(reinterpret_cast<const char*>(b.data()), b.size());
  const size_t at = text.find("cpu");
  ASSERT_NE(at, std::string::npos);
  b[at] = std::byte{'a'};  // "apu"
  EXPECT_THAT(ImportSafetensorsFromBytes(b).status(),
              StatusIs(StatusCode::kCorruption, "invalid device 'apu'"));

  // A device with a newline (a JSON "\n" escape) is quoted on one line.
  std::string header = text.substr(8, text.size() - 8 - 16);
  const size_t dev = header.find("cpu");
  ASSERT_NE(dev, std::string::npos);
  header.replace(dev, 3, "c\\\\nu");  // a JSON string inside a JSON string
  const std::vector<std::byte> nl = Safetensors(header, 16);
  const Status s = ImportSafetensorsFromBytes(nl).status();
  EXPECT_THAT(s, StatusIs(StatusCode::kCorruption, "invalid device 'c\\x0au'"));
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
}

TEST(ForeignInputTest, SafetensorsHeaderErrorsQuoteControlBytesOnOneLine) {
  // A raw newline after a backslash, or where a value should start.
  for (const char* header : {"{\"a\\\n\":1}", "{\"a\":\n\x01}", "{\"a\":\x01}"}) {
    const Status s = ImportSafetensorsFromBytes(Safetensors(header, 0)).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
  }
}

TEST(ForeignInputTest, PyTorchStorageClaimsAreCheckedAgainstTheRecord) {
  // A storage claiming 2^60 floats over a 16-byte record, and a view past the
  // end of a correctly sized storage.
  EXPECT_THAT(ImportPyTorchFromBytes(Archive(TensorPickle(uint64_t{1} << 60, 4))).status(),
              StatusIs(StatusCode::kCorruption, "record 'archive/data/0' holds 16 bytes"));
  EXPECT_THAT(ImportPyTorchFromBytes(Archive(TensorPickle(4, uint64_t{1} << 62))).status(),
              StatusIs(StatusCode::kCorruption, "'w'"));
  EXPECT_THAT(ImportPyTorchFromBytes(Archive(TensorPickle(UINT64_MAX, UINT64_MAX))).status(),
              StatusIs(StatusCode::kCorruption, ""));
}

TEST(ForeignInputTest, PickleStringLongerThanTheInputIsCorruption) {
  std::string p = "\x80\x02X" + U64(0x7fffffff).substr(0, 4) + "abc";
  EXPECT_THAT(ImportPyTorchFromBytes(Archive(p)).status(),
              StatusIs(StatusCode::kCorruption, ""));
}

TEST(ForeignInputTest, SafetensorsAbsurdSizesAreCorruption) {
  // A header length of 2^62, a tensor of 2^60 elements, dims whose product
  // overflows, offsets past the end of the file.
  EXPECT_THAT(ImportSafetensorsFromBytes(Bytes(U64(uint64_t{1} << 62) + "{}")).status(),
              StatusIs(StatusCode::kCorruption, ""));
  for (const char* header :
       {R"({"w":{"dtype":"F32","shape":[1152921504606846976],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551615]}})",
        R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})",
        R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
        R"({"w":{"dtype":"Q9","shape":[4],"data_offsets":[0,16]}})"}) {
    const Status s = ImportSafetensorsFromBytes(Safetensors(header, 16)).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << header << ": " << s.ToString();
    ExpectCleanOutcome(s, {StatusCode::kCorruption}, header);
  }
}

// Peak RSS of reading `bytes` with `kind`'s reader in a child, next to that
// of reading a small valid file of the same kind.
struct Rss {
  std::string outcome;
  long kib = 0;
  long base_kib = 0;
};
Rss MeasureImport(const std::string& kind, std::span<const std::byte> valid,
                  std::span<const std::byte> hostile) {
  const std::string dir = testing::NewTempDir("rss");
  WriteFile(dir + "/valid", valid);
  WriteFile(dir + "/hostile", hostile);
  const std::string base = RunChild({RCKPT_RELIABILITY_CHILD, "import", kind, dir + "/valid"});
  const std::string out = RunChild({RCKPT_RELIABILITY_CHILD, "import", kind, dir + "/hostile"});
  fs::remove_all(dir);
  Rss r;
  r.outcome = out;
  EXPECT_EQ(base.rfind("OK ", 0), 0u) << base;
  const auto sp = out.find(' ');
  if (base.size() > 3 && sp != std::string::npos) {
    r.base_kib = std::stol(base.substr(3));
    r.kib = std::stol(out.substr(sp + 1));
  }
  return r;
}

constexpr long kAllocationBoundKib = 32 * 1024;

TEST(ForeignInputTest, HugePyTorchStorageClaimStaysWithinTheMemoryBound) {
  const Rss r = MeasureImport("pytorch", Archive(TensorPickle(4, 4)),
                              Archive(TensorPickle(uint64_t{1} << 60, uint64_t{1} << 60)));
  EXPECT_EQ(r.outcome.rfind("Corruption ", 0), 0u) << r.outcome;
  EXPECT_LT(r.kib, r.base_kib + kAllocationBoundKib) << r.outcome;
}

TEST(ForeignInputTest, HugeSafetensorsClaimsStayWithinTheMemoryBound) {
  const auto valid = Safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  for (const auto& hostile :
       {Bytes(U64(99'999'999) + "{"),
        Safetensors(R"({"w":{"dtype":"F32","shape":[1152921504606846976],"data_offsets":[0,4611686018427387904]}})",
                    16)}) {
    const Rss r = MeasureImport("safetensors", valid, hostile);
    EXPECT_EQ(r.outcome.rfind("Corruption ", 0), 0u) << r.outcome;
    EXPECT_LT(r.kib, r.base_kib + kAllocationBoundKib) << r.outcome;
  }
}

}  // namespace
}  // namespace rckpt::reliability
