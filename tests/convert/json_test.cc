#include "convert/json.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "convert/tree_json.h"
#include "test_util.h"
#include "util/utf8.h"

namespace rckpt::convert {
namespace {

TEST(JsonTest, ParsesNestedDocumentInOrder) {
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson(R"( {"b": [1, -2.5e3, "x\u00e9\ud83d\ude00"],
      "a": {"t": true, "f": false, "n": null}} )"));
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.members.size(), 2u);
  EXPECT_EQ(j.members[0].first, "b");
  EXPECT_EQ(j.members[0].second.items[0].AsInt(), 1);
  EXPECT_FALSE(j.members[0].second.items[1].IsInteger());
  EXPECT_EQ(j.members[0].second.items[1].AsDouble(), -2500.0);
  EXPECT_EQ(j.members[0].second.items[2].text, "x\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(j.Find("a")->Find("t")->b);
  EXPECT_EQ(j.Find("a")->Find("n")->kind, Json::Kind::kNull);
}

TEST(JsonTest, ReadsIntegersExactly) {
  ASSERT_OK_AND_ASSIGN(Json j, ParseJson("[9223372036854775807, 18446744073709551615, -9223372036854775808]"));
  EXPECT_EQ(j.items[0].AsInt(), INT64_MAX);
  EXPECT_EQ(j.items[1].AsUint(), UINT64_MAX);
  EXPECT_FALSE(j.items[1].AsInt().has_value());
  EXPECT_EQ(j.items[2].AsInt(), INT64_MIN);
  EXPECT_FALSE(j.items[2].AsUint().has_value());
}

TEST(JsonTest, RejectsMalformedDocuments) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[01]", "[1.]", "[-]",
                          "\"\\x\"", "\"\\ud800\"", "\"a\nb\"", "[1] 2", "tru", "{'a':1}",
                          "\"\xff\"", "[1e]"}) {
    EXPECT_THAT(ParseJson(bad), StatusIs(StatusCode::kCorruption, "json")) << bad;
  }
}

TEST(JsonTest, RejectsDuplicateMemberNames) {
  EXPECT_THAT(ParseJson(R"({"a": 1, "a": 2})"), StatusIs(StatusCode::kCorruption, "duplicate"));
}

TEST(JsonTest, BoundsNestingDepth) {
  std::string deep(300, '[');
  deep += std::string(300, ']');
  EXPECT_THAT(ParseJson(deep, 256), StatusIs(StatusCode::kCorruption, "nesting"));
  EXPECT_OK(ParseJson(deep, 400).status());
}

TEST(JsonTest, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
}

Value RoundTrip(const Value& v) {
  std::string s;
  AppendTreeJson(&s, v);
  auto j = ParseJson(s, 1000);
  EXPECT_TRUE(j.ok()) << s;
  auto back = TreeFromJson(*j);
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? *back : Value();
}

TEST(TreeJsonTest, RoundTripsEveryValueKindBitForBit) {
  double nan_payload;
  uint64_t bits = 0x7ff8000000000123ull;
  std::memcpy(&nan_payload, &bits, 8);
  Value tree = Value::Map({
      {Value("null"), Value()},
      {Value("bools"), Value::List({Value(true), Value(false)})},
      {Value("ints"), Value::List({Value(0), Value(INT64_MIN), Value(INT64_MAX)})},
      {Value("floats"), Value::List({Value(0.1), Value(-0.0), Value(1e300), Value(5e-324),
                                     Value(std::numeric_limits<double>::infinity()),
                                     Value(nan_payload), Value(3.0)})},
      {Value("str"), Value("h\xc3\xa9\"\\\n\x01")},
      {Value("bad_utf8"), Value(std::string("\xff\xfe"))},
      {Value("bytes"), Value::Bytes(std::string("\x00\xff", 2))},
      {Value("big"), Value::BigInt(std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9))},
      {Value("refs"), Value::Tuple({Value::TensorRef("a.b"), Value::RngRef("rng")})},
      {Value("set"), Value::Set({Value(1), Value("x")})},
      {Value(7), Value("int key")},
      {Value::Tuple({Value(1), Value(2)}), Value("tuple key")},
      {Value("obj"), Value::Object("torch.Size", Value::Tuple({Value(2), Value(3)}))},
      {Value("inert"), Value::Object("mylib.Thing", Value())},
  });
  Value back = RoundTrip(tree);
  EXPECT_EQ(back, tree) << back.DebugString() << "\n" << tree.DebugString();
  EXPECT_EQ(RoundTrip(Value(3.0)).kind(), ValueKind::kFloat);
  EXPECT_EQ(RoundTrip(Value(3)).kind(), ValueKind::kInt);
}

TEST(TreeJsonTest, RejectsUnknownTagsAndBadPayloads) {
  for (const char* bad : {R"({"$what": 1})", R"({"$bytes": "abc"})", R"({"$bytes": "zz"})",
                          R"({"$float": "00"})", R"({"$map": [[1]]})", R"({"a": 1, "b": 2})",
                          R"({"$object": 1, "fields": null})", "18446744073709551615"}) {
    ASSERT_OK_AND_ASSIGN(Json j, ParseJson(bad));
    EXPECT_THAT(TreeFromJson(j), StatusIs(StatusCode::kCorruption, "tree json")) << bad;
  }
}

}  // namespace
}  // namespace rckpt::convert
