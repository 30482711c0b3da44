// S3Client: signs and sends S3 requests, retries those worth retrying, and
// turns the last answer into a Status naming the URL, the operation and the
// HTTP status. The S3 file system's reader and writer are built on it.
#ifndef RCKPT_SRC_S3_CLIENT_H_
#define RCKPT_SRC_S3_CLIENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "rckpt/s3.h"
#include "rckpt/status.h"
#include "s3/aws_config.h"
#include "s3/clock_skew.h"
#include "s3/credentials.h"
#include "s3/http.h"
#include "s3/sigv4.h"

namespace rckpt::s3 {

// One S3 operation, before it is signed.
struct S3Call {
  const char* op = "";  // "GetObject", ...: named in errors
  std::string method = "GET";
  std::string bucket;
  std::string key;  // empty for a bucket operation
  KeyValues query;
  KeyValues headers;  // besides host, x-amz-date, x-amz-content-sha256, the token
  std::span<const std::byte> body;
  // Hex SHA-256 of `body` to sign it; empty: UNSIGNED-PAYLOAD (HTTPS and
  // the parts' own checksums protect it) or, without a body, the empty one.
  std::string body_sha256;
  std::span<std::byte> into;  // a 2xx answer's body goes here (HttpRequest::into)
  // A 2xx answer must fill `into` exactly (a ranged GET); a shorter one is a
  // broken transfer, tried again.
  bool exact = false;
  // Safe to send again after the server may have acted on it. Requests the
  // server refused before acting (503, 429, a refused connection) are
  // retried either way.
  bool idempotent = true;
  // A 200 whose body is an <Error> (CompleteMultipartUpload) is a failure.
  bool error_in_200 = false;
  // What a 412 means for this call, for its error ("" : the generic one).
  std::string precondition_failed;
  // Create only: sent with `If-None-Match: *`, and the server's 412 (the key
  // exists) is AlreadyExists.
  bool if_none_match = false;
  // Statuses returned as answers rather than errors (416 for the first read
  // of what may be an empty object).
  std::vector<int> answers;
};

// Thread-safe.
class S3Client {
 public:
  // `env` must outlive the client. InvalidArgument for bad options or
  // configuration; nothing is sent.
  static Result<std::unique_ptr<S3Client>> Create(const S3Options& options, const Environment& env);
  ~S3Client();

  // Sends `call`, retrying as S3Options says, and returns the 2xx answer;
  // else the error (NotFound for a missing key, bucket or upload; IoError
  // otherwise) naming op, URL and the last HTTP status or network error.
  Result<HttpResponse> Execute(const S3Call& call);
  // Sends every call at once (at most max_requests in flight) and returns
  // the first error once all have ended.
  Status ExecuteAll(std::span<const S3Call> calls);

  const S3Options& options() const { return options_; }
  const S3Config& config() const { return config_; }

 private:
  struct Attempt;
  S3Client(const S3Options& options, const Environment& env);

  // Everything a try of `call` sends, signed now.
  Status Prepare(const S3Call& call, Attempt& a);
  // After a try: true when it is over (`a.result` is set), false to try
  // again (after `a.delay_ms`).
  bool Judge(const S3Call& call, Attempt& a, HttpResponse response);
  Status Failure(const S3Call& call, const Attempt& a, const HttpResponse& r) const;
  std::string RegionOf(const std::string& bucket);
  // The custom endpoint, or AWS's for `region` (a region hint's too).
  Result<Endpoint> EndpointFor(const std::string& region) const;
  std::string Url(const S3Call& call, const Endpoint& endpoint, std::string* host,
                  std::string* canonical_uri) const;
  int BackoffMs(int attempt) const;

  S3Options options_;
  const Environment& env_;
  Profile profile_;
  S3Config config_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<CredentialsProvider> credentials_;
  std::mutex mu_;
  std::map<std::string, std::string> bucket_region_;  // from region hints
  ClockSkew clock_;  // learnt from a server that refused the request's time
  // Whether the endpoint ever answered: until it has, a refused connection
  // is a wrong endpoint, not a restart, and fails fast.
  std::atomic<bool> answered_{false};
};

}  // namespace rckpt::s3

#endif  // RCKPT_SRC_S3_CLIENT_H_
