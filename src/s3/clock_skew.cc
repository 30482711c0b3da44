#include "s3/clock_skew.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace rckpt::s3 {
namespace {

// A 401 or 403 is taken for a clock error when the server's time is this
// far from ours (the AWS SDKs' bound; S3 itself allows 15 minutes).
constexpr int64_t kPossibleSkewSeconds = 4 * 60;

bool IsDefiniteSkewCode(std::string_view code) {
  return code == "RequestTimeTooSkewed" || code == "RequestExpired" ||
         code == "RequestInTheFuture";
}

bool IsPossibleSkew(int status, std::string_view code) {
  return status == 401 || status == 403 || code == "SignatureDoesNotMatch" ||
         code == "InvalidSignatureException" || code == "AuthFailure";
}

}  // namespace

std::string AmzDate(int64_t unix_seconds) {
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Result<int64_t> ParseHttpDate(std::string_view text) {
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::string s(text.substr(0, 64));
  char weekday[4] = {}, month[4] = {}, zone[4] = {};
  std::tm tm{};
  int consumed = 0;
  const int got = std::sscanf(s.c_str(), "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d %3[A-Z]%n",
                              weekday, &tm.tm_mday, month, &tm.tm_year, &tm.tm_hour, &tm.tm_min,
                              &tm.tm_sec, zone, &consumed);
  tm.tm_mon = -1;
  for (int m = 0; m < 12 && got == 8; ++m) {
    if (std::string_view(month) == kMonths[m]) tm.tm_mon = m;
  }
  if (got != 8 || tm.tm_mon < 0 || std::string_view(zone) != "GMT" ||
      static_cast<size_t>(consumed) != s.size() || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return Status::InvalidArgument("'" + s + "' is not an HTTP date (Sun, 06 Nov 1994 08:49:37 GMT)");
  }
  tm.tm_year -= 1900;
  return static_cast<int64_t>(::timegm(&tm));
}

ClockSkew::ClockSkew(Clock clock) : clock_(clock) {}

bool ClockSkew::Correct(int status, std::string_view code, std::string_view date) {
  const bool definite = IsDefiniteSkewCode(code);
  if (!definite && !IsPossibleSkew(status, code)) return false;
  if (date.empty()) return false;
  const Result<int64_t> server = ParseHttpDate(date);
  if (!server.ok()) return false;
  const int64_t system = clock_();
  if (!definite && std::llabs(*server - (system + offset_s_.load())) <= kPossibleSkewSeconds) {
    return false;
  }
  offset_s_.store(*server - system);
  return true;
}

int64_t SystemClock() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace rckpt::s3
