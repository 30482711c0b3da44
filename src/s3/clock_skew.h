// The time requests are signed with: the system clock, corrected by the
// offset to the server's clock once a server has refused a request as too
// far from its own time, as the AWS SDKs do (RequestTimeTooSkewed; a 401 or
// 403 whose Date is more than four minutes from this host's).
#ifndef RCKPT_SRC_S3_CLOCK_SKEW_H_
#define RCKPT_SRC_S3_CLOCK_SKEW_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt::s3 {

// Seconds since the epoch, now; a seam for tests of renewal and skew.
using Clock = int64_t (*)();
int64_t SystemClock();

// "YYYYMMDDTHHMMSSZ" (x-amz-date) of `unix_seconds`.
std::string AmzDate(int64_t unix_seconds);

// Seconds since the epoch of an HTTP Date header, "Sun, 06 Nov 1994
// 08:49:37 GMT" (RFC 9110's IMF-fixdate, the form every server sends);
// InvalidArgument otherwise.
Result<int64_t> ParseHttpDate(std::string_view text);

// Thread-safe.
class ClockSkew {
 public:
  explicit ClockSkew(Clock clock = SystemClock);

  // The time to sign with: the system's plus the offset learnt.
  int64_t Now() const { return clock_() + offset_s_.load(); }
  int64_t offset_s() const { return offset_s_.load(); }

  // Whether an error answer (`status`, its S3 error `code`, its Date header
  // or empty) says the request's time was too far from the server's. If so,
  // the offset becomes the server's time minus the system's and true is
  // returned: the request is to be signed again. The SDKs' rules: the codes
  // RequestTimeTooSkewed, RequestExpired and RequestInTheFuture always, and
  // SignatureDoesNotMatch, InvalidSignatureException, AuthFailure or any 401
  // or 403 when the Date is more than four minutes from Now(). Without a
  // Date there is nothing to correct by: false.
  bool Correct(int status, std::string_view code, std::string_view date);

 private:
  const Clock clock_;
  std::atomic<int64_t> offset_s_{0};
};

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_CLOCK_SKEW_H_
