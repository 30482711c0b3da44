// CRC-32 (zip's): the folding kernel, where the CPU has it, agrees with the
// portable tables at every length, alignment and starting value.
#include <random>
#include <vector>

#include "convert/crc32.h"
#include "gtest/gtest.h"

namespace rckpt::convert {
namespace {

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(g());
  return out;
}

TEST(Crc32Test, FoldingAgreesWithTheTablesAtEveryLengthAndAlignment) {
  const std::vector<std::byte> buf = RandomBytes(9000, 1);
  const std::span<const std::byte> all(buf);
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n = 0; n + offset <= 4200; n += (n < 600 ? 1 : 61)) {
      auto s = all.subspan(offset, n);
      ASSERT_EQ(Crc32(s, 0x1234567u), Crc32Portable(s, 0x1234567u))
          << "offset " << offset << " length " << n;
    }
  }
  EXPECT_EQ(Crc32(all), Crc32Portable(all));
}

TEST(Crc32Test, ContinuesFromAPreviousValue) {
  const std::vector<std::byte> buf = RandomBytes(100000, 2);
  const std::span<const std::byte> all(buf);
  for (size_t cut : {0, 1, 63, 256, 4097, 99999}) {
    EXPECT_EQ(Crc32(all.subspan(cut), Crc32(all.first(cut))), Crc32(all)) << cut;
  }
}

}  // namespace
}  // namespace rckpt::convert
