#include "codec/codec.h"

#include <zstd.h>

#include <cstring>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;

std::vector<std::byte> Bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// Compressible but not trivial: small values with noise, like float mantissas.
std::vector<std::byte> Compressible(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>((i % 7 == 0) ? rng() % 256 : (i / 64) % 13);
  }
  return v;
}

std::vector<std::byte> Compress(std::span<const std::byte> raw, int level = 3) {
  std::vector<std::byte> out(ZstdBound(raw.size()));
  Result<size_t> n = ZstdCompress(raw, out, level);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  out.resize(n.ok() ? *n : 0);
  return out;
}

// The definition in codec.h, written the slow, obvious way.
std::vector<std::byte> ReferenceShuffle(std::span<const std::byte> src,
                                        size_t elem) {
  std::vector<std::byte> dst(src.begin(), src.end());
  const size_t n = src.size() / elem;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < elem; ++j) dst[j * n + i] = src[i * elem + j];
  }
  return dst;
}

// Magic, frame header descriptor, window descriptor, dictionary id and
// content size, as RFC 8878 section 3.1.1.1 lays them out.
size_t FrameHeaderSize(std::span<const std::byte> frame) {
  const auto fhd = static_cast<unsigned>(frame[4]);
  const bool single_segment = (fhd >> 5) & 1;
  const size_t dict_id[] = {0, 1, 2, 4};
  const size_t content_size[] = {single_segment ? 1u : 0u, 2, 4, 8};
  return 4 + 1 + (single_segment ? 0 : 1) + dict_id[fhd & 3] +
         content_size[fhd >> 6];
}

TEST(ChecksumTest, EmptyInputMatchesKnownVector) {
  EXPECT_EQ(Checksum({}), 0x2D06800538D394C2ull);
}

TEST(ChecksumTest, HelloWorldMatchesKnownVector) {
  EXPECT_EQ(Checksum(Bytes("hello world")), 0xD447B1EA40E6988Bull);
}

// Checksum() may run an AVX2 build of XXH3; it must give libxxhash's value
// for every length class XXH3 treats differently (0-16, 17-128, 129-240,
// long inputs with partial stripes and blocks).
TEST(ChecksumTest, MatchesPortableXxh3AtEveryLengthClass) {
  std::vector<std::byte> data(70000);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  }
  for (size_t n = 0; n <= data.size(); n = n < 1100 ? n + 1 : n * 3 / 2 + 7) {
    std::span<const std::byte> s(data.data(), n);
    ASSERT_EQ(Checksum(s), ChecksumPortable(s)) << "length " << n;
    // Unaligned start.
    if (n > 0) {
      std::span<const std::byte> u(data.data() + 1, n - 1);
      ASSERT_EQ(Checksum(u), ChecksumPortable(u)) << "length " << n - 1 << " at +1";
    }
  }
}

TEST(ChecksumTest, StreamOfPiecesEqualsChecksumOfTheWhole) {
  std::vector<std::byte> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<std::byte>((i * 40503u) >> 7);
  }
  for (size_t piece : {1ul, 63ul, 64ul, 1000ul, 4096ul, 262144ul, 1ul << 20}) {
    ChecksumStream s;
    for (size_t off = 0; off < data.size(); off += piece) {
      s.Update(std::span<const std::byte>(data).subspan(off, std::min(piece, data.size() - off)));
    }
    EXPECT_EQ(s.Digest(), ChecksumPortable(data)) << "pieces of " << piece;
  }
  ChecksumStream empty;
  EXPECT_EQ(empty.Digest(), Checksum({}));
}

TEST(ChecksumTest, EveryBitFlipChangesChecksum) {
  std::vector<std::byte> data = RandomBytes(300, 7);
  const uint64_t base = Checksum(data);
  for (size_t i = 0; i < data.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      data[i] ^= std::byte{static_cast<unsigned char>(1u << bit)};
      EXPECT_NE(Checksum(data), base) << "byte " << i << " bit " << bit;
      data[i] ^= std::byte{static_cast<unsigned char>(1u << bit)};
    }
  }
}

TEST(ShuffleTest, GroupsEachByteOfEveryElementAndKeepsTail) {
  // Three 4-byte elements and a 2-byte partial element.
  const std::vector<std::byte> src = Bytes("ABCDabcd0123xy");
  std::vector<std::byte> dst(src.size());
  ShuffleBytes(src, dst, 4);
  EXPECT_EQ(dst, Bytes("Aa0Bb1Cc2Dd3xy"));
  std::vector<std::byte> back(src.size());
  UnshuffleBytes(dst, back, 4);
  EXPECT_EQ(back, src);
}

TEST(ShuffleTest, InputShorterThanOneElementIsCopied) {
  const std::vector<std::byte> src = Bytes("xyz");
  std::vector<std::byte> dst(3);
  ShuffleBytes(src, dst, 8);
  EXPECT_EQ(dst, src);
  UnshuffleBytes(src, dst, 8);
  EXPECT_EQ(dst, src);
}

class ShuffleRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ShuffleRoundTrip, MatchesReferenceAndInvertsForManySizes) {
  const uint32_t elem = GetParam();
  // Sizes around the 16-element vector blocks, with partial trailing
  // elements, and one large enough for several scalar blocks.
  std::vector<size_t> sizes = {0, 1, elem - 1, elem, elem + 1};
  for (size_t n : {15, 16, 17, 31, 32, 33, 1000, 5000}) {
    for (size_t tail : {size_t{0}, size_t{1}, size_t{elem - 1}}) {
      sizes.push_back(n * elem + tail);
    }
  }
  for (size_t size : sizes) {
    const std::vector<std::byte> src = RandomBytes(size, size * 31 + elem);
    std::vector<std::byte> shuffled(size);
    ShuffleBytes(src, shuffled, elem);
    ASSERT_EQ(shuffled, ReferenceShuffle(src, elem)) << "size " << size;
    std::vector<std::byte> back(size);
    UnshuffleBytes(shuffled, back, elem);
    ASSERT_EQ(back, src) << "size " << size;
  }
}

INSTANTIATE_TEST_SUITE_P(ElementSizes, ShuffleRoundTrip,
                         ::testing::Values(2u, 3u, 4u, 5u, 8u, 12u, 16u, 32u));

TEST(ZstdTest, RoundTripsManySizes) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{1} << 16,
                      (size_t{1} << 20) + 3}) {
    const std::vector<std::byte> raw = Compressible(size);
    const std::vector<std::byte> frame = Compress(raw);
    std::vector<std::byte> back(size);
    ASSERT_OK(ZstdDecompressExact(frame, back));
    EXPECT_EQ(back, raw) << "size " << size;
  }
}

TEST(ZstdTest, RoundTripsIncompressibleDataAtSeveralLevels) {
  const std::vector<std::byte> raw = RandomBytes(100000, 3);
  for (int level : {-5, 1, 3, 9, 19}) {
    const std::vector<std::byte> frame = Compress(raw, level);
    std::vector<std::byte> back(raw.size());
    ASSERT_OK(ZstdDecompressExact(frame, back));
    EXPECT_EQ(back, raw) << "level " << level;
  }
}

TEST(ZstdTest, CompressIntoTooSmallBufferIsInvalidArgument) {
  const std::vector<std::byte> raw = RandomBytes(4096, 5);
  std::vector<std::byte> dst(100);
  EXPECT_THAT(ZstdCompress(raw, dst, 3),
              StatusIs(StatusCode::kInvalidArgument, "ZstdBound"));
}

TEST(ZstdTest, CompressWorksFromManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &ok] {
      bool all = true;
      for (int i = 0; i < 20; ++i) {
        const std::vector<std::byte> raw = Compressible(10000 + i, t * 100 + i);
        std::vector<std::byte> frame(ZstdBound(raw.size()));
        Result<size_t> n = ZstdCompress(raw, frame, 1 + i % 5);
        if (!n.ok()) {
          all = false;
          continue;
        }
        frame.resize(*n);
        std::vector<std::byte> back(raw.size());
        all = all && ZstdDecompressExact(frame, back).ok() && back == raw;
      }
      ok[t] = all;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(ok, ::testing::Each(1));
}

TEST(ZstdDecompressTest, RejectsEmptyInput) {
  std::vector<std::byte> dst(10);
  EXPECT_THAT(
      ZstdDecompressExact({}, dst),
      StatusIs(StatusCode::kCorruption, "expected at least 4 bytes, got 0"));
}

TEST(ZstdDecompressTest, RejectsGarbage) {
  const std::vector<std::byte> garbage = RandomBytes(1000, 9);
  std::vector<std::byte> dst(1000);
  EXPECT_THAT(ZstdDecompressExact(garbage, dst),
              StatusIs(StatusCode::kCorruption, "magic: expected 0xFD2FB528"));
}

TEST(ZstdDecompressTest, RejectsFrameDeclaringMoreThanDestination) {
  const std::vector<std::byte> frame = Compress(Compressible(100));
  std::vector<std::byte> dst(64);
  EXPECT_THAT(
      ZstdDecompressExact(frame, dst),
      StatusIs(StatusCode::kCorruption,
               "content size: expected 64 bytes, frame declares 100 bytes"));
}

TEST(ZstdDecompressTest, RejectsFrameDeclaringLessThanDestination) {
  const std::vector<std::byte> frame = Compress(Compressible(100));
  std::vector<std::byte> dst(200);
  EXPECT_THAT(
      ZstdDecompressExact(frame, dst),
      StatusIs(StatusCode::kCorruption,
               "content size: expected 200 bytes, frame declares 100 bytes"));
}

TEST(ZstdDecompressTest, RejectsFrameWithoutContentSize) {
  const std::vector<std::byte> raw = Compressible(1000);
  std::vector<std::byte> frame(ZstdBound(raw.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  const size_t n =
      ZSTD_compress2(cctx, frame.data(), frame.size(), raw.data(), raw.size());
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(n));
  frame.resize(n);
  std::vector<std::byte> dst(raw.size());
  EXPECT_THAT(ZstdDecompressExact(frame, dst),
              StatusIs(StatusCode::kCorruption, "does not declare one"));
}

TEST(ZstdDecompressTest, RejectsTruncatedFrameAtEveryLength) {
  const std::vector<std::byte> raw = Compressible(5000);
  const std::vector<std::byte> frame = Compress(raw);
  std::vector<std::byte> dst(raw.size());
  for (size_t len = 0; len < frame.size(); ++len) {
    EXPECT_THAT(ZstdDecompressExact(std::span(frame).first(len), dst),
                StatusIs(StatusCode::kCorruption, "zstd frame"))
        << "length " << len;
  }
}

TEST(ZstdDecompressTest, RejectsTrailingBytesAfterFrame) {
  const std::vector<std::byte> raw = Compressible(500);
  std::vector<std::byte> frame = Compress(raw);
  const size_t frame_size = frame.size();
  frame.push_back(std::byte{0});
  std::vector<std::byte> dst(raw.size());
  EXPECT_THAT(ZstdDecompressExact(frame, dst),
              StatusIs(StatusCode::kCorruption,
                       "frame ends after " + std::to_string(frame_size)));
}

TEST(ZstdDecompressTest, RejectsTwoConcatenatedFrames) {
  const std::vector<std::byte> raw = Compressible(500);
  std::vector<std::byte> frames = Compress(raw);
  const std::vector<std::byte> second = Compress(raw);
  frames.insert(frames.end(), second.begin(), second.end());
  std::vector<std::byte> dst(raw.size() * 2);
  EXPECT_THAT(ZstdDecompressExact(frames, dst),
              StatusIs(StatusCode::kCorruption, "content size"));
  std::vector<std::byte> one(raw.size());
  EXPECT_THAT(ZstdDecompressExact(frames, one),
              StatusIs(StatusCode::kCorruption, "frame ends after"));
}

TEST(ZstdDecompressTest, RejectsSkippableFrame) {
  // Magic 0x184D2A50, 4-byte length 0.
  const std::vector<std::byte> skippable = {
      std::byte{0x50}, std::byte{0x2A}, std::byte{0x4D}, std::byte{0x18},
      std::byte{0},    std::byte{0},    std::byte{0},    std::byte{0}};
  std::vector<std::byte> dst;
  EXPECT_THAT(ZstdDecompressExact(skippable, dst),
              StatusIs(StatusCode::kCorruption, "magic"));
}

TEST(ZstdDecompressTest, RejectsReservedBlockType) {
  const std::vector<std::byte> raw = Compressible(5000);
  std::vector<std::byte> frame = Compress(raw);
  const size_t header = FrameHeaderSize(frame);
  ASSERT_LT(header, frame.size());
  frame[header] |= std::byte{0x06};  // block type 3: reserved
  std::vector<std::byte> dst(raw.size());
  EXPECT_THAT(ZstdDecompressExact(frame, dst),
              StatusIs(StatusCode::kCorruption, "zstd frame"));
}

TEST(ZstdDecompressTest, FlippedBytesNeverWritePastDestination) {
  const std::vector<std::byte> raw = Compressible(3000);
  const std::vector<std::byte> frame = Compress(raw);
  constexpr size_t kGuard = 64;
  int rejected = 0;
  for (size_t i = 0; i < frame.size(); ++i) {
    std::vector<std::byte> bad = frame;
    bad[i] ^= std::byte{0x5A};
    std::vector<std::byte> buffer(raw.size() + 2 * kGuard, std::byte{0xEE});
    Status s =
        ZstdDecompressExact(bad, std::span(buffer).subspan(kGuard, raw.size()));
    if (!s.ok()) {
      ++rejected;
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    }
    for (size_t g = 0; g < kGuard; ++g) {
      ASSERT_EQ(buffer[g], std::byte{0xEE}) << "flip at " << i;
      ASSERT_EQ(buffer[buffer.size() - 1 - g], std::byte{0xEE})
          << "flip at " << i;
    }
  }
  // Header flips at least are caught by ZstdDecompressExact itself; data
  // flips may decode to other bytes, which the chunk checksum catches.
  EXPECT_GT(rejected, 4);
}

}  // namespace
}  // namespace rckpt
