// Every damaged or foreign file is rejected with its documented code and a
// message that says what and where.
#include <algorithm>

#include "codec/codec.h"
#include "format/format_test_util.h"
#include "format/layout.h"
#include "format/manifest.h"

namespace rckpt {
namespace {

using testing::HostTensor;

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Checkpoint ck;
    ASSERT_OK(ck.AddTensor("model", "w", HostTensor(DType::kF32, {64, 64}, 1)));
    ASSERT_OK(ck.AddTensor("model", "b", HostTensor(DType::kF32, {64}, 2)));
    ASSERT_OK(ck.AddRng("g", RngKind::kOpaque, testing::RandomBytes(10, 3)));
    ck.Tree()["epoch"] = 3;
    SaveOptions o;
    o.fs = &fs_;
    o.codec = Codec::kZstd;
    ASSERT_OK(Save("/good.rckpt", ck, o));
    good_ = *fs_.GetFile("/good.rckpt");
    ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs_, "/good.rckpt"));
    manifest_ = reader->manifest();
  }

  Status Open(std::vector<std::byte> bytes) {
    fs_.SetFile("/bad.rckpt", std::move(bytes));
    auto r = FileReader::Open(fs_, "/bad.rckpt");
    if (!r.ok()) return r.status();
    return (*r)->VerifyAll();
  }

  std::vector<std::byte> WithManifest(const std::vector<uint8_t>& manifest) {
    return testing::WithManifest(good_, manifest_, manifest);
  }

  std::vector<ChunkMeta> AllChunks() const {
    std::vector<ChunkMeta> chunks;
    for (const auto& t : manifest_.tensors) chunks.insert(chunks.end(), t.chunks.begin(), t.chunks.end());
    return chunks;
  }

  // The good file with its manifest rebuilt from `chunks`, the tensors of
  // `ck` (one chunk each) and `tree`.
  std::vector<std::byte> Rebuilt(const std::vector<ChunkMeta>& chunks, const Checkpoint& ck,
                                 const Value& tree = Value()) {
    FlatTree flat = *EncodeTree(tree);
    std::vector<uint64_t> first;
    for (size_t i = 0; i < ck.tensors().size(); ++i) first.push_back(i);
    return WithManifest(BuildManifest({ck, chunks, first, flat, manifest_.alignment,
                                       manifest_.data_begin, manifest_.data_end, "test", 0}));
  }

  // The saved checkpoint's tensors, "b" with another shape.
  static Checkpoint Tensors(Shape b_shape = {64}) {
    Checkpoint ck;
    EXPECT_OK(ck.AddTensor("model", "w", HostTensor(DType::kF32, {64, 64}, 1)));
    EXPECT_OK(ck.AddTensor("model", "b", HostTensor(DType::kF32, b_shape, 2)));
    return ck;
  }

  MemFileSystem fs_;
  std::vector<std::byte> good_;
  Manifest manifest_;
};

TEST_F(CorruptionTest, GoodFileVerifies) { EXPECT_OK(Open(good_)); }

TEST_F(CorruptionTest, RejectsEmptyFile) {
  EXPECT_THAT(Open({}), StatusIs(StatusCode::kCorruption, "smaller than the smallest"));
}

TEST_F(CorruptionTest, RejectsMissingFile) {
  EXPECT_THAT(FileReader::Open(fs_, "/nope.rckpt").status(),
              StatusIs(StatusCode::kNotFound, "nope.rckpt"));
}

TEST_F(CorruptionTest, RejectsGitLfsPointer) {
  std::string ptr =
      "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 1234567890\n"
      "padding padding padding padding padding padding padding padding padding\n";
  std::vector<std::byte> b(reinterpret_cast<const std::byte*>(ptr.data()),
                           reinterpret_cast<const std::byte*>(ptr.data()) + ptr.size());
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption, "Git LFS pointer"));
}

TEST_F(CorruptionTest, RejectsZipArchiveWithAHint) {
  std::vector<std::byte> b(200, std::byte{0});
  std::memcpy(b.data(), "PK\x03\x04", 4);
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption, "rckpt convert"));
}

TEST_F(CorruptionTest, RejectsWrongMagic) {
  auto b = good_;
  b[1] = std::byte{'X'};
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption, "bad magic"));
}

TEST_F(CorruptionTest, RejectsNewerMajorVersion) {
  auto b = good_;
  Header h;
  h.version_major = 2;
  auto hb = EncodeHeader(h);
  std::copy(hb.begin(), hb.end(), b.begin());
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kUnsupported, "newer than this reader"));
}

TEST_F(CorruptionTest, RejectsTruncationAtAnyByte) {
  // Every prefix of the file, sampled densely at the ends.
  for (size_t n = 0; n < good_.size(); n += (n < 200 || n > good_.size() - 200) ? 1 : 97) {
    std::vector<std::byte> b(good_.begin(), good_.begin() + n);
    Status s = Open(b);
    ASSERT_EQ(s.code(), StatusCode::kCorruption) << "truncated to " << n << ": " << s.ToString();
  }
}

TEST_F(CorruptionTest, RejectsAppendedBytes) {
  auto b = good_;
  b.push_back(std::byte{0});
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption, "bad magic at the end"));
}

TEST_F(CorruptionTest, RejectsABitFlipAnywhere) {
  // Every byte of the header, manifest and footer; a sample of the chunks.
  for (size_t i = 0; i < good_.size(); ++i) {
    bool meta = i < kHeaderSize || i >= manifest_.manifest_offset;
    if (!meta && i % 61 != 0) continue;
    auto b = good_;
    b[i] ^= std::byte{0x10};
    Status s = Open(b);
    // Padding bytes, covered by no checksum, are checked to be zero.
    ASSERT_FALSE(s.ok()) << "flip at byte " << i << " went unnoticed";
    ASSERT_TRUE(s.code() == StatusCode::kCorruption || s.code() == StatusCode::kUnsupported)
        << s.ToString();
  }
}

TEST_F(CorruptionTest, NonZeroPaddingIsCorruptionNamingTheOffset) {
  // Raw tensors of odd sizes: gaps after small chunks, before a page-aligned
  // one, and between the data region and the 8-aligned manifest. Every byte
  // no chunk covers must be zero.
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "a", HostTensor(DType::kF32, {1000}, 1)));
  ASSERT_OK(ck.AddTensor("model", "b", HostTensor(DType::kF32, {3}, 2)));
  ASSERT_OK(ck.AddTensor("model", "c", HostTensor(DType::kF32, {2048}, 3)));
  ASSERT_OK(ck.AddTensor("model", "d", HostTensor(DType::kU8, {5}, 4)));
  SaveOptions o;
  o.fs = &fs_;
  ASSERT_OK(Save("/padded.rckpt", ck, o));
  const std::vector<std::byte> good = *fs_.GetFile("/padded.rckpt");
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(fs_, "/padded.rckpt"));
  const Manifest& m = reader->manifest();
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  for (const auto& t : m.tensors) {
    for (const auto& c : t.chunks) extents.emplace_back(c.offset, c.offset + c.stored_size);
  }
  std::sort(extents.begin(), extents.end());
  std::vector<uint64_t> probes;  // first and last byte of every gap
  uint64_t cursor = m.data_begin;
  extents.emplace_back(m.manifest_offset, m.manifest_offset);
  for (const auto& [begin, end] : extents) {
    if (begin > cursor) {
      probes.push_back(cursor);
      probes.push_back(begin - 1);
    }
    cursor = end;
  }
  ASSERT_GE(probes.size(), 6u) << "the file should have gaps between chunks and before the manifest";
  EXPECT_EQ(probes.back(), m.manifest_offset - 1);
  EXPECT_OK(Open(good));
  for (uint64_t at : probes) {
    for (std::byte value : {std::byte{0x01}, std::byte{0xff}}) {
      auto b = good;
      b[at] = value;
      EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption,
                                    "padding byte at offset " + std::to_string(at) + " is"))
          << at;
    }
  }
}

TEST_F(CorruptionTest, ChunkChecksumMismatchNamesTensorAndChunk) {
  auto b = good_;
  const auto& c = manifest_.tensors[0].chunks[0];
  b[c.offset + c.stored_size / 2] ^= std::byte{1};
  EXPECT_THAT(Open(b), StatusIs(StatusCode::kCorruption, "tensor 'w': chunk 0"));
}

TEST_F(CorruptionTest, RejectsTwoTensorsWithTheSameName) {
  std::vector<uint8_t> manifest(
      reinterpret_cast<const uint8_t*>(good_.data()) + manifest_.manifest_offset,
      reinterpret_cast<const uint8_t*>(good_.data()) + manifest_.manifest_offset +
          manifest_.manifest_size);
  const uint8_t b_name[] = {1, 0, 0, 0, 'b', 0};  // the FlatBuffers string "b"
  auto at = std::search(manifest.begin(), manifest.end(), std::begin(b_name), std::end(b_name));
  ASSERT_NE(at, manifest.end());
  at[4] = 'w';
  EXPECT_THAT(Open(WithManifest(manifest)),
              StatusIs(StatusCode::kCorruption, "tensor 'w': name appears twice"));
}

TEST_F(CorruptionTest, RejectsOverlappingExtents) {
  auto chunks = AllChunks();
  chunks[1].offset = chunks[0].offset;  // second tensor's chunk on top of the first
  EXPECT_THAT(Open(Rebuilt(chunks, Tensors())), StatusIs(StatusCode::kCorruption, "overlap"));
}

TEST_F(CorruptionTest, RejectsExtentPastTheDataRegion) {
  auto chunks = AllChunks();
  chunks[1].offset = AlignUp(manifest_.data_end, 64);
  EXPECT_THAT(Open(Rebuilt(chunks, Tensors())),
              StatusIs(StatusCode::kCorruption, "outside the data region"));
}

TEST_F(CorruptionTest, RejectsSizeThatDisagreesWithShape) {
  // Same names; "b" now claims 65 elements.
  EXPECT_THAT(Open(Rebuilt(AllChunks(), Tensors({65}))),
              StatusIs(StatusCode::kCorruption, "tensor 'b'"));
}

TEST_F(CorruptionTest, RejectsAbsurdDeclaredSizeWithoutAllocating) {
  // A tensor claiming 2^60 bytes is caught by the chunk-coverage rule before
  // any buffer is allocated.
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", HostTensor(DType::kF32, {64, 64}, 1)));
  Tensor huge = Tensor::Borrow(TensorView{nullptr, DType::kU8, {int64_t{1} << 60}, {}});
  ASSERT_OK(ck.AddTensor("model", "b", huge));
  EXPECT_THAT(Open(Rebuilt(AllChunks(), ck)), StatusIs(StatusCode::kCorruption, "the tensor needs"));
}

TEST_F(CorruptionTest, RejectsTreeWithBackwardChildIndex) {
  FlatTree tree = *EncodeTree(Value::List({Value::List({1}), 2}));
  tree.nodes[1].first = 1;  // the inner list points at itself
  Checkpoint ck = Tensors();
  std::vector<uint64_t> first = {0, 1};
  auto m = BuildManifest({ck, AllChunks(), first, tree, manifest_.alignment, manifest_.data_begin,
                          manifest_.data_end, "test", 0});
  EXPECT_THAT(Open(WithManifest(m)), StatusIs(StatusCode::kCorruption, "state tree node 1"));
}

TEST(TreeCodec, RejectsUnreachableNodesAndUnknownKinds) {
  FlatTree tree = *EncodeTree(Value::List({1, 2}));
  auto nodes = tree.nodes;
  nodes.push_back(FlatNode{});
  EXPECT_THAT(DecodeTree(nodes, tree.bytes).status(),
              StatusIs(StatusCode::kCorruption, "not reachable"));
  nodes = tree.nodes;
  nodes[2].kind = 99;
  EXPECT_THAT(DecodeTree(nodes, tree.bytes).status(),
              StatusIs(StatusCode::kCorruption, "unknown kind 99"));
  nodes = tree.nodes;
  nodes[0].count = 5;
  EXPECT_THAT(DecodeTree(nodes, tree.bytes).status(),
              StatusIs(StatusCode::kCorruption, "pass the end"));
}

TEST(ManifestLimits, SixtyFourBitOffsetsAndSizesValidate) {
  // Chunks far beyond 4 GiB in a (virtual) 40 GiB file validate exactly.
  const uint64_t kGiB = 1ull << 30;
  Checkpoint ck;
  Tensor big = Tensor::Borrow(TensorView{nullptr, DType::kF32, {int64_t{3} * (1 << 30)}, {}});
  ASSERT_OK(ck.AddTensor("model", "huge", big));
  std::vector<ChunkMeta> chunks;
  for (uint64_t i = 0; i < 12; ++i) {
    ChunkMeta c;
    c.offset = 4096 + i * kGiB;
    c.raw_size = c.stored_size = kGiB;
    chunks.push_back(c);
  }
  FlatTree tree = *EncodeTree(Value());
  std::vector<uint64_t> first = {0};
  auto m = BuildManifest({ck, chunks, first, tree, 4096, 64, 4096 + 12 * kGiB, "t", 0});
  FileBounds bounds{40 * kGiB, 64, 4096 + 12 * kGiB, 4096};
  ASSERT_OK_AND_ASSIGN(Manifest parsed, ParseManifest(m, bounds));
  ASSERT_EQ(parsed.tensors[0].nbytes, 12 * kGiB);
  EXPECT_EQ(parsed.tensors[0].chunks[11].offset, 4096 + 11 * kGiB);
  EXPECT_EQ(parsed.tensors[0].chunks[11].tensor_offset, 11 * kGiB);
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(ManifestLimits, RejectsZstdChunkClaimingMoreThanZstdCanExpand) {
  Checkpoint ck;
  Tensor t = Tensor::Borrow(TensorView{nullptr, DType::kU8, {int64_t{1} << 30}, {}});
  ASSERT_OK(ck.AddTensor("model", "bomb", t));
  ChunkMeta c;
  c.offset = 64;
  c.stored_size = 100;
  c.raw_size = 1ull << 30;
  c.codec = Codec::kZstd;
  std::vector<ChunkMeta> chunks{c};
  FlatTree tree = *EncodeTree(Value());
  std::vector<uint64_t> first = {0};
  auto m = BuildManifest({ck, chunks, first, tree, 4096, 64, 4096, "t", 0});
  FileBounds bounds{1 << 20, 64, 4096, 4096};
  EXPECT_THAT(ParseManifest(m, bounds).status(),
              StatusIs(StatusCode::kCorruption, "more than zstd can expand"));
}

}  // namespace
}  // namespace rckpt
