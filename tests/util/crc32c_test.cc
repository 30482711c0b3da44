#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace rckpt {
namespace {

std::vector<std::byte> Bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::vector<std::byte> Fill(size_t n, int (*f)(size_t)) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(f(i));
  return out;
}

// RFC 3720, B.4 (iSCSI's CRC-32C examples), and the common check value.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  const std::vector<std::byte> zeros = Fill(32, [](size_t) { return 0; });
  const std::vector<std::byte> ones = Fill(32, [](size_t) { return 0xff; });
  const std::vector<std::byte> up =
      Fill(32, [](size_t i) { return static_cast<int>(i); });
  const std::vector<std::byte> down =
      Fill(32, [](size_t i) { return static_cast<int>(31 - i); });
  const std::vector<std::byte> pdu = Bytes(
      {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
       0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
       0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
       0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  const std::vector<std::byte> check =
      Bytes({'1', '2', '3', '4', '5', '6', '7', '8', '9'});
  for (auto* crc : {&Crc32c, &Crc32cPortable}) {
    EXPECT_EQ(crc(zeros, 0), 0x8a9136aau);
    EXPECT_EQ(crc(ones, 0), 0x62a8ab43u);
    EXPECT_EQ(crc(up, 0), 0x46dd794eu);
    EXPECT_EQ(crc(down, 0), 0x113fdb5cu);
    EXPECT_EQ(crc(pdu, 0), 0xd9963a56u);
    EXPECT_EQ(crc(check, 0), 0xe3069283u);
    EXPECT_EQ(crc({}, 0), 0u);
  }
}

// Long inputs take the three-stream path: it must agree with the tables at
// every length and split.
TEST(Crc32cTest, FastPathAndContinuationAgreeWithTables) {
  std::mt19937 rng(7);
  std::vector<std::byte> data(3 * 8192 * 5 + 77);
  for (std::byte& b : data) b = static_cast<std::byte>(rng());
  const std::span<const std::byte> all(data);
  const uint32_t want = Crc32cPortable(all);
  EXPECT_EQ(Crc32c(all), want);
  for (size_t split : {size_t{0}, size_t{1}, size_t{8191}, size_t{24576},
                       size_t{50001}, data.size()}) {
    EXPECT_EQ(Crc32c(all.subspan(split), Crc32c(all.first(split))), want)
        << split;
  }
  for (size_t n :
       {size_t{24575}, size_t{24576}, size_t{24577}, size_t{73735}}) {
    EXPECT_EQ(Crc32c(all.first(n)), Crc32cPortable(all.first(n))) << n;
  }
}

TEST(Crc32cTest, CopyChecksumsWhatItCopies) {
  std::mt19937 rng(11);
  std::vector<std::byte> src(300000), dst(src.size());
  for (std::byte& b : src) b = static_cast<std::byte>(rng());
  const uint32_t first =
      CopyWithCrc32c(dst.data(), std::span(src).first(1000), 0);
  const uint32_t all =
      CopyWithCrc32c(dst.data() + 1000, std::span(src).subspan(1000), first);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(all, Crc32cPortable(src));
}

// As S3 writes it: base64 of the big-endian bytes.
TEST(Crc32cTest, Base64IsBigEndian) {
  EXPECT_EQ(Crc32cBase64(0xe3069283u), "4waSgw==");
  EXPECT_EQ(Crc32cBase64(0), "AAAAAA==");
  EXPECT_EQ(Crc32cBase64(0xffffffffu), "/////w==");
}

}  // namespace
}  // namespace rckpt
