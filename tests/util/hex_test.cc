#include "util/hex.h"

#include <vector>

#include "test_util.h"

namespace rckpt {
namespace {

TEST(HexTest, EncodesEveryByteAsTwoLowercaseDigits) {
  EXPECT_EQ(HexEncode(std::string_view("\x00\x0f\xa0\xff", 4)), "000fa0ff");
  const std::vector<std::byte> bytes = {std::byte{0x12}, std::byte{0xab}};
  EXPECT_EQ(HexEncode(bytes), "12ab");
  EXPECT_EQ(HexEncode(std::string_view()), "");
}

TEST(HexTest, AppendsOneByteInEitherCase) {
  std::string out = "%";
  AppendHexByte(out, 0x2f, HexCase::kUpper);
  AppendHexByte(out, 0xc3);
  EXPECT_EQ(out, "%2Fc3");
}

TEST(HexTest, DigitsArePaddedAndMostSignificantFirst) {
  EXPECT_EQ(HexDigits(0xab, 4), "00ab");
  EXPECT_EQ(HexDigits(0xdeadbeef, 8), "deadbeef");
  EXPECT_EQ(HexDigits(0x123456789, 8), "23456789");
  EXPECT_EQ(Hex64(0x1234abcdULL), "0x000000001234abcd");
  EXPECT_EQ(Hex64(~0ULL), "0xffffffffffffffff");
}

TEST(HexTest, EscapesAByteAsBackslashX) {
  std::string out = "a";
  AppendEscapedByte(out, 0x07);
  AppendEscapedByte(out, 0xfe);
  EXPECT_EQ(out, "a\\x07\\xfe");
}

}  // namespace
}  // namespace rckpt
