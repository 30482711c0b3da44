// The rckpt reader rejects manifests carrying unknown enum values, duplicate
// names, out-of-range indices and sizes that overflow, each with Corruption
// and a one-line message naming the record. The manifest is patched in place
// (through the FlatBuffers accessors) and re-wrapped with a valid checksum
// and footer, so only the semantic validator stands between it and the
// loader. Complements tests/format/corruption_test.cc.
#include <cstring>
#include <random>

#include <filesystem>
#include <fstream>

#include "codec/codec.h"
#include "format/file_reader.h"
#include "format/format_test_util.h"
#include "format/layout.h"
#include "reliability/child_process.h"
#include "rckpt/checkpoint_generated.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "rckpt/rng.h"
#include "test_util.h"

namespace rckpt::reliability {
namespace {

Tensor Filled(DType dtype, Shape shape, uint8_t seed) {
  const uint64_t n = *ShapeBytes(shape, dtype);
  std::vector<std::byte> b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(seed + i * 7);
  return *Tensor::FromBytes(dtype, std::move(shape), b);
}

class ManifestSurgeryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Checkpoint ck;
    ASSERT_OK(ck.AddTensor("model", "w", Filled(DType::kF32, {16, 16}, 1)));
    ASSERT_OK(ck.AddTensor("scheduler", "b", Filled(DType::kF32, {16}, 2)));
    ASSERT_OK(ck.AddRng("g", RngKind::kMt19937_64, CaptureEngine(std::mt19937_64(5)),
                        Device::Cuda(1)));
    ck.Tree()["epoch"] = 3;
    ck.Tree()["lr"] = Value::List({1, 2, 3});
    SaveOptions o;
    o.fs = &fs_;
    o.codec = Codec::kNone;
    ASSERT_OK(Save("/good.rckpt", ck, o));
    good_ = *fs_.GetFile("/good.rckpt");
    ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs_, "/good.rckpt"));
    meta_ = reader->manifest();
    const auto* p = reinterpret_cast<const uint8_t*>(good_.data()) + meta_.manifest_offset;
    manifest_.assign(p, p + meta_.manifest_size);
  }

  const fb::Manifest& Root() const { return *fb::GetManifest(manifest_.data()); }

  // Offset in manifest_ of `field` of a table, or of a struct member.
  template <typename T>
  size_t FieldOffset(const T* table, uint16_t field) const {
    const uint8_t* addr = reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(field);
    EXPECT_NE(addr, nullptr) << "field " << field << " is not stored";
    return addr ? static_cast<size_t>(addr - manifest_.data()) : 0;
  }
  size_t Offset(const void* p) const {
    return static_cast<size_t>(static_cast<const uint8_t*>(p) - manifest_.data());
  }
  template <typename T>
  void Put(size_t offset, T value) {
    std::memcpy(manifest_.data() + offset, &value, sizeof value);
  }

  // The file with the patched manifest and a matching footer.
  std::vector<std::byte> Patched() const {
    return testing::WithManifest(good_, meta_, manifest_);
  }

  // Opens the patched file and checks every chunk.
  Status OpenPatched() {
    fs_.SetFile("/bad.rckpt", Patched());
    auto r = FileReader::Open(fs_, "/bad.rckpt");
    Status s = r.ok() ? (*r)->VerifyAll() : r.status();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
    return s;
  }

  MemFileSystem fs_;
  std::vector<std::byte> good_;
  Manifest meta_;
  std::vector<uint8_t> manifest_;
};

TEST_F(ManifestSurgeryTest, UnpatchedManifestOpens) { EXPECT_OK(OpenPatched()); }

TEST_F(ManifestSurgeryTest, RejectsUnknownDType) {
  Put<uint8_t>(FieldOffset(Root().tensors()->Get(0), fb::Tensor::VT_DTYPE), 200);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "200"));
}

TEST_F(ManifestSurgeryTest, RejectsUnknownRole) {
  Put<uint8_t>(FieldOffset(Root().tensors()->Get(1), fb::Tensor::VT_ROLE), 9);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "role"));
}

TEST_F(ManifestSurgeryTest, RejectsUnknownSectionRole) {
  Put<uint8_t>(FieldOffset(Root().sections()->Get(1), fb::Section::VT_ROLE), 9);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "role"));
}

TEST_F(ManifestSurgeryTest, RejectsSectionIndexOutOfRange) {
  Put<uint32_t>(FieldOffset(Root().tensors()->Get(1), fb::Tensor::VT_SECTION), 7);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "section"));
}

TEST_F(ManifestSurgeryTest, RejectsUnknownRngKind) {
  Put<uint8_t>(FieldOffset(Root().rng()->Get(0), fb::Rng::VT_KIND), 77);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "77"));
}

TEST_F(ManifestSurgeryTest, RejectsUnknownCodecAndShuffleWidth) {
  const size_t chunk = Offset(Root().chunks()->Get(0));
  Put<uint8_t>(chunk + 32, 9);  // Chunk.codec
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "codec"));
  Put<uint8_t>(chunk + 32, 0);
  Put<uint8_t>(chunk + 33, 17);  // Chunk.shuffle_elem: 0 or 2..16
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "17"));
}

TEST_F(ManifestSurgeryTest, RejectsDuplicateTensorNames) {
  // "b" becomes "w": same length, so only the name changes.
  const flatbuffers::String* name = Root().tensors()->Get(1)->name();
  manifest_[Offset(name->c_str())] = 'w';
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'w'"));
}

TEST_F(ManifestSurgeryTest, RejectsEmptyName) {
  const flatbuffers::String* name = Root().tensors()->Get(1)->name();
  Put<uint32_t>(Offset(name), 0);  // the string's length prefix
  manifest_[Offset(name->c_str())] = 0;  // and its terminator, as the verifier wants
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "name is empty"));
}

TEST_F(ManifestSurgeryTest, RejectsNameThatIsNotUtf8) {
  // "b" becomes 0xff: same length, no longer UTF-8 (FORMAT.md: names are UTF-8).
  const flatbuffers::String* name = Root().tensors()->Get(1)->name();
  manifest_[Offset(name->c_str())] = static_cast<uint8_t>(0xff);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "name is not valid UTF-8"));
}

TEST_F(ManifestSurgeryTest, RejectsChunkExtentThatWrapsAround) {
  const size_t chunk = Offset(Root().chunks()->Get(0));
  Put<uint64_t>(chunk + 0, UINT64_MAX - 63);  // offset + stored_size wraps
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "chunk"));
}

TEST_F(ManifestSurgeryTest, RejectsChunkRawSizeAbsurdlyLarge) {
  const size_t chunk = Offset(Root().chunks()->Get(0));
  Put<uint64_t>(chunk + 16, uint64_t{1} << 62);  // raw_size
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "chunk"));
}

TEST_F(ManifestSurgeryTest, RejectsShapeWhoseElementCountOverflows) {
  const auto* shape = Root().tensors()->Get(0)->shape();
  Put<int64_t>(Offset(shape->data()), int64_t{1} << 40);
  Put<int64_t>(Offset(shape->data()) + 8, int64_t{1} << 40);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'w'"));
}

TEST_F(ManifestSurgeryTest, RejectsNegativeDimension) {
  const auto* shape = Root().tensors()->Get(0)->shape();
  Put<int64_t>(Offset(shape->data()), -16);
  Put<int64_t>(Offset(shape->data()) + 8, -16);  // the product is positive again
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'w'"));
}

TEST_F(ManifestSurgeryTest, RejectsNbytesThatDisagreesWithShape) {
  Put<uint64_t>(FieldOffset(Root().tensors()->Get(0), fb::Tensor::VT_NBYTES), 1000);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'w'"));
}

TEST_F(ManifestSurgeryTest, RejectsChunkRangeOutOfRange) {
  const auto* t = Root().tensors()->Get(1);
  Put<uint64_t>(FieldOffset(t, fb::Tensor::VT_FIRST_CHUNK), uint64_t{1} << 63);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'b'"));
}

TEST_F(ManifestSurgeryTest, RejectsTreeChildIndexPastTheEnd) {
  const auto* nodes = Root().tree_nodes();
  for (size_t i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i)->count() > 0) {  // the root map
      Put<uint64_t>(Offset(nodes->Get(i)), 1000);  // Node.first
      break;
    }
  }
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "state tree node"));
}

TEST_F(ManifestSurgeryTest, RejectsTreeStringPastTheTreeBytes) {
  const auto* nodes = Root().tree_nodes();
  bool patched = false;
  for (size_t i = 0; i < nodes->size() && !patched; ++i) {
    if (nodes->Get(i)->str_len() > 0) {
      Put<uint64_t>(Offset(nodes->Get(i)) + 8, UINT64_MAX - 1);  // str_off wraps with str_len
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "state tree node"));
}

TEST_F(ManifestSurgeryTest, RejectsDataRegionLargerThanTheFile) {
  Put<uint64_t>(FieldOffset(&Root(), fb::Manifest::VT_DATA_END), uint64_t{1} << 60);
  EXPECT_FALSE(OpenPatched().ok());
  EXPECT_EQ(OpenPatched().code(), StatusCode::kCorruption);
}

TEST_F(ManifestSurgeryTest, RejectsUnknownOriginDeviceType) {
  Put<uint8_t>(FieldOffset(Root().rng()->Get(0), fb::Rng::VT_ORIGIN_TYPE), 5);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'g'"));
}

TEST_F(ManifestSurgeryTest, ExabyteTensorIsRejectedWithinTheMemoryBound) {
  // "b" claims 2^58 f32 elements: 1 EiB.
  const auto* t = Root().tensors()->Get(1);
  Put<int64_t>(Offset(t->shape()->data()), int64_t{1} << 58);
  Put<uint64_t>(FieldOffset(t, fb::Tensor::VT_NBYTES), uint64_t{1} << 60);
  EXPECT_THAT(OpenPatched(), StatusIs(StatusCode::kCorruption, "'b'"));

  // In a process of its own, so its peak RSS is its own.
  const std::string dir = testing::NewTempDir("exabyte");
  const std::string good = dir + "/good.rckpt";
  const std::string bad = dir + "/bad.rckpt";
  std::ofstream(good, std::ios::binary)
      .write(reinterpret_cast<const char*>(good_.data()), good_.size());
  const auto b = Patched();
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  const std::string base = RunChild({RCKPT_RELIABILITY_CHILD, "import", "rckpt", good});
  const std::string out = RunChild({RCKPT_RELIABILITY_CHILD, "import", "rckpt", bad});
  ASSERT_EQ(base.rfind("OK ", 0), 0u) << base;
  ASSERT_EQ(out.rfind("Corruption ", 0), 0u) << out;
  const long base_kib = std::stol(base.substr(3));
  const long kib = std::stol(out.substr(11));
  EXPECT_LT(kib, base_kib + 32 * 1024) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rckpt::reliability
