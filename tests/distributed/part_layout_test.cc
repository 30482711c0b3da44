// The layout of a collective save to object storage (part_layout.h), with
// the S3 writer's memory per rank (built into s3_unit_tests).
#include "distributed/part_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "rckpt/s3.h"
#include "s3/s3_writer.h"

namespace rckpt {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kTiB = 1ull << 40;
const SharedWrite kS3{"id", 5 * kMiB, 5 * kGiB, 10000};

// Every rule a store puts on the parts: each region whole parts of its own,
// in order, holding its bytes; every part but the very last one size (R2,
// Garage), within S3's 5 MiB to 5 GiB; the tail's parts after them, the
// last no larger; 10,000 at most.
void ExpectStoreRules(const PartLayout& l, const std::vector<uint64_t>& lengths,
                      uint64_t tail) {
  ASSERT_EQ(l.ranks.size(), lengths.size());
  uint64_t start = 0, part = 1;
  for (size_t r = 0; r < lengths.size(); ++r) {
    const RankParts& p = l.ranks[r];
    ASSERT_EQ(p.start, start) << r;
    ASSERT_EQ(p.first_part, part) << r;
    ASSERT_GE(p.extent, lengths[r]) << r;
    ASSERT_FALSE(p.part_bytes.empty()) << r;
    uint64_t sum = 0;
    for (uint64_t n : p.part_bytes) {
      ASSERT_EQ(n, l.part_bytes) << r;
      sum += n;
    }
    ASSERT_EQ(sum, p.extent) << r;
    // Less than a part of padding (a rank with nothing: one part of zeros).
    if (lengths[r] > 0) {
      ASSERT_LT(p.extent - lengths[r], l.part_bytes) << r;
    } else {
      ASSERT_EQ(p.extent, l.part_bytes) << r;
    }
    start += p.extent;
    part += p.part_bytes.size();
  }
  EXPECT_EQ(l.data_end, start);
  EXPECT_EQ(l.last_part, part);
  EXPECT_GE(l.part_bytes, 5 * kMiB);
  EXPECT_LE(l.part_bytes, 5 * kGiB);
  const std::vector<uint64_t> tails = TailPartBytes(l, tail);
  ASSERT_FALSE(tails.empty());
  uint64_t sum = 0;
  for (size_t i = 0; i < tails.size(); ++i) {
    if (i + 1 < tails.size()) {
      EXPECT_EQ(tails[i], l.part_bytes);
    }
    EXPECT_LE(tails[i], l.part_bytes);
    EXPECT_GT(tails[i], 0u);
    sum += tails[i];
  }
  EXPECT_EQ(sum, tail);
  EXPECT_LE(l.last_part + tails.size() - 1, 10000u);
}

// A rank's host memory while it uploads: its parts in flight and the one
// being filled, bounded by the options (S3Options::upload_buffer_bytes, or
// two parts), never by its region or the job.
uint64_t RankMemory(const PartLayout& l) {
  const S3Options o;
  return (s3::PartsInFlight(o, l.part_bytes) + 1) * l.part_bytes;
}

TEST(PartLayoutTest, SmallRegionsArePaddedToOnePart) {
  const std::vector<uint64_t> lengths = {64, 5 * kMiB + 1, 20 * kMiB + 100, 0};
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths, 3 * kMiB);
  EXPECT_EQ(l->part_bytes, 8 * kMiB);
  EXPECT_EQ(l->ranks[0].part_bytes.size(), 1u);  // 64 bytes padded
  EXPECT_EQ(l->ranks[2].part_bytes.size(), 3u);
  EXPECT_EQ(l->ranks[3].part_bytes.size(),
            1u);  // nothing to save: one padded part
}

// Two ranks of about 100 MiB: the regions' last parts were 12 MiB among
// 8 MiB ones, which R2 refuses.
TEST(PartLayoutTest, UnevenRegionsKeepOnePartSize) {
  const std::vector<uint64_t> lengths = {100 * kMiB + 4096, 100 * kMiB,
                                         3 * kMiB, 41 * kMiB};
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths,
                   20 * kMiB);  // a tail larger than a part: whole parts
}

TEST(PartLayoutTest, OneGibOnOneRank) {
  const std::vector<uint64_t> lengths = {kGiB};
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths, 4096);
  EXPECT_EQ(l->part_bytes, 8 * kMiB);
  EXPECT_EQ(l->last_part, 129u);
  EXPECT_EQ(RankMemory(*l), 72 * kMiB);
}

TEST(PartLayoutTest, OneTibOnEightRanks) {
  const std::vector<uint64_t> lengths(8, kTiB / 8);
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths, 64 * kMiB);
  EXPECT_LE(l->part_bytes, 106 * kMiB);  // 1 TiB / 9,984 parts, to the MiB
  EXPECT_LE(RankMemory(*l), S3Options().upload_buffer_bytes);
}

TEST(PartLayoutTest, OneTibOn1024Ranks) {
  const std::vector<uint64_t> lengths(1024, kTiB / 1024);
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths, 100 * kMiB);
  EXPECT_LE(l->last_part - 1, 9984u);
  EXPECT_LE(RankMemory(*l), S3Options().upload_buffer_bytes);
}

// Uneven ranks, 10 TiB in all: the parts grow with the job (10,000 of them
// hold it), a rank's memory stays within the options: two parts when one
// is larger than half of upload_buffer_bytes.
TEST(PartLayoutTest, TenTibOn1024UnevenRanks) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> lengths;
  for (int r = 0; r < 1024; ++r) lengths.push_back(rng() % (20 * kGiB));
  Result<PartLayout> l = LayOutParts(lengths, 4096, kS3);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ExpectStoreRules(*l, lengths, 7 * kMiB);
  EXPECT_LE(RankMemory(*l),
            std::max(S3Options().upload_buffer_bytes, 2 * l->part_bytes));
  // The smallest size that fits: one MiB less does not.
  uint64_t parts = 0;
  for (uint64_t n : lengths) {
    parts += std::max<uint64_t>(
        1, (n + l->part_bytes - kMiB - 1) / (l->part_bytes - kMiB));
  }
  EXPECT_GT(parts, 10000u - kTailParts);
}

TEST(PartLayoutTest, RefusesWhatCannotFit) {
  // More ranks than parts.
  Result<PartLayout> wide =
      LayOutParts(std::vector<uint64_t>(10000, 1), 4096, kS3);
  EXPECT_EQ(wide.status().code(), StatusCode::kIoError);
  EXPECT_NE(wide.status().message().find("10000 parts"), std::string::npos)
      << wide.status().ToString();
  // More than 10,000 parts of 5 GiB.
  Result<PartLayout> big = LayOutParts({60 * kTiB}, 4096, kS3);
  EXPECT_EQ(big.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace rckpt
