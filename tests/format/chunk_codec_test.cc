#include "format/chunk_codec.h"

#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "format/format_test_util.h"

namespace rckpt {
namespace {

using testing::RandomBytes;

// Floats of a slowly varying signal: compress better shuffled.
std::vector<std::byte> Smooth(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const float f = 1.0f + static_cast<float>(i % 1024) / 4096.0f;
    std::memcpy(v.data() + i, &f, 4);
  }
  return v;
}

struct Encoded {
  ChunkMeta meta;
  std::vector<std::byte> stored;
  bool stored_is_raw = false;  // the returned span was `raw` itself
};

Encoded Encode(std::span<const std::byte> raw, Codec codec, uint32_t elem, int level = 3) {
  Encoded e;
  std::vector<std::byte> shuffled(raw.size());
  std::vector<std::byte> frame(EncodedBound(codec, raw.size()));
  auto stored = EncodeChunk(raw, codec, level, elem, shuffled, frame, &e.meta);
  EXPECT_TRUE(stored.ok()) << stored.status().ToString();
  if (!stored.ok()) return e;
  e.stored_is_raw = stored->data() == raw.data();
  e.stored.assign(stored->begin(), stored->end());
  return e;
}

std::vector<std::byte> Decode(const Encoded& e, bool keep_shuffled = false) {
  std::vector<std::byte> out(e.meta.raw_size);
  ScratchBuffer scratch;
  Status s = DecodeChunk(e.meta, e.stored, out, scratch, keep_shuffled);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ChunkCodecTest, ShuffleElemForFollowsTheCodecAndTheShuffleOption) {
  EXPECT_EQ(ShuffleElemFor(DType::kF32, Codec::kZstd, Shuffle::kAuto), 4u);
  EXPECT_EQ(ShuffleElemFor(DType::kBF16, Codec::kZstd, Shuffle::kAuto), 2u);
  EXPECT_EQ(ShuffleElemFor(DType::kC64, Codec::kZstd, Shuffle::kAuto), 4u);
  EXPECT_EQ(ShuffleElemFor(DType::kC128, Codec::kZstd, Shuffle::kAuto), 8u);
  EXPECT_EQ(ShuffleElemFor(DType::kI64, Codec::kZstd, Shuffle::kAuto), 0u);
  EXPECT_EQ(ShuffleElemFor(DType::kI64, Codec::kZstd, Shuffle::kOn), 8u);
  EXPECT_EQ(ShuffleElemFor(DType::kU8, Codec::kZstd, Shuffle::kOn), 0u);
  EXPECT_EQ(ShuffleElemFor(DType::kF32, Codec::kZstd, Shuffle::kOff), 0u);
  EXPECT_EQ(ShuffleElemFor(DType::kF32, Codec::kNone, Shuffle::kOn), 0u);
}

TEST(ChunkCodecTest, RoundTripEveryCodecWithAndWithoutShuffle) {
  const std::vector<std::byte> raw = Smooth(64 << 10);
  for (Codec codec : {Codec::kNone, Codec::kZstd}) {
    for (uint32_t elem : {0u, 2u, 4u}) {
      SCOPED_TRACE(std::string(CodecName(codec)) + " shuffle " + std::to_string(elem));
      const Encoded e = Encode(raw, codec, codec == Codec::kZstd ? elem : 0);
      EXPECT_EQ(e.meta.raw_size, raw.size());
      EXPECT_EQ(e.meta.stored_size, e.stored.size());
      EXPECT_EQ(e.meta.checksum, Checksum(e.stored));
      EXPECT_EQ(e.meta.codec, codec);
      EXPECT_EQ(Decode(e), raw);
    }
  }
}

TEST(ChunkCodecTest, CodecNoneStoresTheRawBytesThemselves) {
  const std::vector<std::byte> raw = Smooth(4096);
  const Encoded e = Encode(raw, Codec::kNone, 0);
  EXPECT_TRUE(e.stored_is_raw);
  EXPECT_TRUE(StoredRaw(e.meta));
}

TEST(ChunkCodecTest, IncompressibleChunkIsStoredRawAndUnshuffled) {
  const std::vector<std::byte> raw = RandomBytes(8192, 7);
  const Encoded e = Encode(raw, Codec::kZstd, 4);
  EXPECT_TRUE(e.stored_is_raw);
  EXPECT_EQ(e.meta.codec, Codec::kNone);
  EXPECT_EQ(e.meta.shuffle_elem, 0u);
  EXPECT_EQ(e.stored, raw);
}

TEST(ChunkCodecTest, KeepShuffledLeavesTheFilterForTheDevice) {
  const std::vector<std::byte> raw = Smooth(16384);
  const Encoded e = Encode(raw, Codec::kZstd, 4);
  ASSERT_EQ(e.meta.codec, Codec::kZstd);
  ASSERT_EQ(e.meta.shuffle_elem, 4u);
  std::vector<std::byte> shuffled(raw.size());
  ShuffleBytes(raw, shuffled, 4);
  EXPECT_EQ(Decode(e, /*keep_shuffled=*/true), shuffled);
}

TEST(ChunkCodecTest, RejectsAFrameThatDoesNotDecodeToTheRawSize) {
  const std::vector<std::byte> raw = Smooth(16384);
  Encoded e = Encode(raw, Codec::kZstd, 0);
  ASSERT_EQ(e.meta.codec, Codec::kZstd);
  e.meta.raw_size -= 4;
  std::vector<std::byte> out(e.meta.raw_size);
  ScratchBuffer scratch;
  EXPECT_EQ(DecodeChunk(e.meta, e.stored, out, scratch).code(), StatusCode::kCorruption);
}

TEST(ChunkCodecTest, StoredRawInOrderNeedsEveryChunkRawAndBackToBack) {
  std::vector<ChunkMeta> chunks(3);
  for (size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].offset = 4096 + i * 100;
    chunks[i].tensor_offset = i * 100;
    chunks[i].raw_size = chunks[i].stored_size = 100;
  }
  EXPECT_TRUE(StoredRawInOrder(chunks));
  EXPECT_FALSE(StoredRawInOrder({}));
  std::vector<ChunkMeta> gap = chunks;
  gap[2].offset += 64;
  EXPECT_FALSE(StoredRawInOrder(gap));
  std::vector<ChunkMeta> shuffled = chunks;
  shuffled[1].shuffle_elem = 4;
  EXPECT_FALSE(StoredRawInOrder(shuffled));
  std::vector<ChunkMeta> compressed = chunks;
  compressed[0].codec = Codec::kZstd;
  EXPECT_FALSE(StoredRawInOrder(compressed));
}

}  // namespace
}  // namespace rckpt
