// The signing clock: HTTP dates, and the offset learnt from a server that
// refused a request's time, by the AWS SDKs' rules.
#include "s3/clock_skew.h"

#include "test_util.h"

namespace rckpt::s3 {
namespace {

int64_t g_now = 0;
int64_t FakeClock() { return g_now; }

// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example.
constexpr int64_t kRfcExample = 784111777;

TEST(ClockSkewTest, ParsesHttpDatesAndWritesAmzDates) {
  ASSERT_OK_AND_ASSIGN(int64_t t, ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"));
  EXPECT_EQ(t, kRfcExample);
  EXPECT_EQ(AmzDate(kRfcExample), "19941106T084937Z");
  for (const char* bad : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Foo 1994 08:49:37 GMT",
                          "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
                          "Sun, 06 Nov 1994 25:49:37 GMT"}) {
    EXPECT_THAT(ParseHttpDate(bad), StatusIs(StatusCode::kInvalidArgument, "not an HTTP date"))
        << bad;
  }
}

TEST(ClockSkewTest, ASkewErrorSetsTheOffsetToTheServersDate) {
  g_now = kRfcExample - 40 * 60;  // this host is 40 minutes behind
  ClockSkew clock(FakeClock);
  EXPECT_EQ(clock.Now(), g_now);
  const char* date = "Sun, 06 Nov 1994 08:49:37 GMT";
  EXPECT_FALSE(clock.Correct(403, "RequestTimeTooSkewed", ""));  // no Date: nothing to go by
  EXPECT_FALSE(clock.Correct(404, "NoSuchKey", date));           // not about time
  EXPECT_FALSE(clock.Correct(500, "InternalError", date));
  EXPECT_TRUE(clock.Correct(403, "RequestTimeTooSkewed", date));
  EXPECT_EQ(clock.offset_s(), 40 * 60);
  EXPECT_EQ(clock.Now(), kRfcExample);
  g_now += 10;
  EXPECT_EQ(clock.Now(), kRfcExample + 10);  // the offset stays
}

TEST(ClockSkewTest, AnAuthErrorIsSkewOnlyWhenTheDateIsMoreThanFourMinutesOff) {
  const char* date = "Sun, 06 Nov 1994 08:49:37 GMT";
  ClockSkew clock(FakeClock);
  g_now = kRfcExample - 3 * 60;  // within the SDKs' four minutes: a real refusal
  EXPECT_FALSE(clock.Correct(403, "AccessDenied", date));
  EXPECT_FALSE(clock.Correct(400, "SignatureDoesNotMatch", date));
  EXPECT_EQ(clock.offset_s(), 0);
  g_now = kRfcExample + 5 * 60;  // ahead by five minutes
  EXPECT_TRUE(clock.Correct(403, "", date));  // a HEAD's 403 has no body
  EXPECT_EQ(clock.offset_s(), -5 * 60);
  EXPECT_FALSE(clock.Correct(403, "AccessDenied", date));  // corrected: now a real refusal
  ClockSkew other(FakeClock);
  EXPECT_TRUE(other.Correct(400, "SignatureDoesNotMatch", date));
  ClockSkew expired(FakeClock);
  EXPECT_TRUE(expired.Correct(400, "RequestExpired", date));
  EXPECT_TRUE(ClockSkew(FakeClock).Correct(401, "", date));
}

}  // namespace
}  // namespace rckpt::s3
