#include "util/utf8.h"

#include <gtest/gtest.h>

namespace rckpt {
namespace {

TEST(Utf8Test, SequenceLengthsOfWellFormedCharacters) {
  EXPECT_EQ(Utf8SequenceAt("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceAt("\xc3\xa9", 0), 2u);          // é
  EXPECT_EQ(Utf8SequenceAt("\xe2\x82\xac", 0), 3u);      // €
  EXPECT_EQ(Utf8SequenceAt("\xf0\x9f\x98\x80", 0), 4u);  // U+1F600
  EXPECT_EQ(Utf8SequenceAt("\xf4\x8f\xbf\xbf", 0), 4u);  // U+10FFFF
  EXPECT_EQ(Utf8SequenceAt("ab", 2), 0u);                 // past the end
}

TEST(Utf8Test, MalformedSequencesHaveNoLength) {
  EXPECT_EQ(Utf8SequenceAt("\x80", 0), 0u);              // stray continuation
  EXPECT_EQ(Utf8SequenceAt("\xc3", 0), 0u);              // truncated
  EXPECT_EQ(Utf8SequenceAt("\xe2\x82", 0), 0u);          // truncated
  EXPECT_EQ(Utf8SequenceAt("\xc0\xaf", 0), 0u);          // overlong '/'
  EXPECT_EQ(Utf8SequenceAt("\xe0\x80\xaf", 0), 0u);      // overlong
  EXPECT_EQ(Utf8SequenceAt("\xed\xa0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceAt("\xf4\x90\x80\x80", 0), 0u);  // > U+10FFFF
  EXPECT_EQ(Utf8SequenceAt("\xff", 0), 0u);
  EXPECT_EQ(Utf8SequenceAt("\xc3(", 0), 0u);             // bad continuation
}

TEST(Utf8Test, WholeStrings) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("model.layers.0.weight"));
  EXPECT_TRUE(IsValidUtf8("gewicht.\xc3\xa4\xe2\x82\xac"));
  EXPECT_FALSE(IsValidUtf8("ok\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xa4ok"));
}

}  // namespace
}  // namespace rckpt
