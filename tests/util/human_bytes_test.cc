#include "rckpt/human_bytes.h"

#include "test_util.h"

namespace rckpt {
namespace {

TEST(HumanBytesTest, ExactBelowOneKibThenBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1768), "1.7 KiB");  // 1.8 KB in decimal units
  EXPECT_EQ(HumanBytes(55ull << 20), "55.0 MiB");
  EXPECT_EQ(HumanBytes(1'000'000'000), "953.7 MiB");
  EXPECT_EQ(HumanBytes(3ull << 30), "3.0 GiB");
  EXPECT_EQ(HumanBytes(5ull << 40), "5.0 TiB");
  EXPECT_EQ(HumanBytes(UINT64_MAX), "16.0 EiB");
}

TEST(RenderRateTest, GibPerSecondWithTwoDecimalsThenAsHumanBytes) {
  EXPECT_EQ(RenderRate(5ull << 29, 1.0), "2.50 GiB/s");
  EXPECT_EQ(RenderRate(1ull << 30, 1.0), "1.00 GiB/s");
  EXPECT_EQ(RenderRate(1'000'000'000, 1.0), "953.7 MiB/s");  // 1 GB/s
  EXPECT_EQ(RenderRate(45'600'000, 1.0), "43.5 MiB/s");
  EXPECT_EQ(RenderRate(3ull << 20, 2.0), "1.5 MiB/s");
  EXPECT_EQ(RenderRate(2471, 0.06), "40.2 KiB/s");  // a small file's convert
  EXPECT_EQ(RenderRate(512, 1.0), "512 B/s");
  EXPECT_EQ(RenderRate(45'600'000, 0.0), "0 B/s");  // no time measured
}

}  // namespace
}  // namespace rckpt
