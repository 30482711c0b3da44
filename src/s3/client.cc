#include "s3/client.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <thread>

#include "s3/url.h"
#include "s3/xml.h"

namespace rckpt::s3 {
namespace {

// Before the endpoint has ever answered, a refused connection is tried this
// many times: a wrong port or host fails in well under a second.
constexpr int kFirstConnectTries = 2;

using SteadyClock = std::chrono::steady_clock;

bool IsThrottle(int status, const std::string& code) {
  return status == 503 || status == 429 || code == "SlowDown" || code == "Throttling" ||
         code == "ThrottlingException" || code == "RequestLimitExceeded" ||
         code == "ServiceUnavailable";
}

bool IsExpiredToken(const std::string& code) {
  return code == "ExpiredToken" || code == "ExpiredTokenException" ||
         code == "TokenRefreshRequired";
}

std::string Described(const HttpResponse& r, const ErrorBody& e) {
  if (r.error != TransportError::kNone) return r.error_text;
  std::string out = "HTTP " + std::to_string(r.status);
  if (!e.code.empty()) out += " " + e.code;
  if (!e.message.empty()) out += ": " + e.message;
  return out;
}

}  // namespace

struct S3Client::Attempt {
  int sends = 0;            // tries sent
  int counted = 0;          // failed tries that count against max_attempts
  bool refreshed = false;   // new credentials asked for after an expired token
  bool redirected = false;  // a region hint followed
  bool reclocked = false;   // signed again with the server's clock
  std::string region;
  Credentials creds;  // of the last try: their source and key id name errors
  HttpRequest request;
  std::shared_ptr<HttpClient::Call> inflight;
  int delay_ms = 0;
  SteadyClock::time_point not_before;
  std::optional<Result<HttpResponse>> result;
};

S3Client::S3Client(const S3Options& options, const Environment& env)
    : options_(options), env_(env) {}

S3Client::~S3Client() = default;

Result<std::unique_ptr<S3Client>> S3Client::Create(const S3Options& options,
                                                   const Environment& env) {
  auto check = [](bool ok, const std::string& what) {
    return ok ? Status::Ok() : Status::InvalidArgument("S3Options::" + what);
  };
  RCKPT_RETURN_IF_ERROR(
      check(options.max_requests >= 1 && options.max_requests <= 1024,
            "max_requests is " + std::to_string(options.max_requests) + ": expected 1 to 1024"));
  RCKPT_RETURN_IF_ERROR(
      check(options.upload_parts_in_flight >= 1 && options.upload_parts_in_flight <= 256,
            "upload_parts_in_flight is " + std::to_string(options.upload_parts_in_flight) +
                ": expected 1 to 256"));
  RCKPT_RETURN_IF_ERROR(check(options.part_bytes == 0 || (options.part_bytes >= (5ull << 20) &&
                                                          options.part_bytes <= (5ull << 30)),
                              "part_bytes is " + std::to_string(options.part_bytes) +
                                  ": expected 0 (from the object's size) or 5 MiB to 5 GiB"));
  RCKPT_RETURN_IF_ERROR(
      check(options.max_attempts >= 1 && options.max_attempts <= 100,
            "max_attempts is " + std::to_string(options.max_attempts) + ": expected 1 to 100"));
  RCKPT_RETURN_IF_ERROR(check(
      options.retry_base_delay_ms >= 0 && options.retry_max_delay_ms >= options.retry_base_delay_ms,
      "retry delays: expected 0 <= retry_base_delay_ms <= "
      "retry_max_delay_ms"));
  RCKPT_RETURN_IF_ERROR(check(options.connect_timeout_ms >= 1 && options.stall_timeout_s >= 1,
                              "connect_timeout_ms and stall_timeout_s must be positive"));
  if (options.encryption != S3Encryption::kKms && !options.kms_key_id.empty()) {
    return Status::InvalidArgument("S3Options::kms_key_id is set but encryption is not kKms");
  }
  std::unique_ptr<S3Client> c(new S3Client(options, env));
  RCKPT_ASSIGN_OR_RETURN(c->profile_, LoadProfile(options, env));
  RCKPT_ASSIGN_OR_RETURN(c->config_, ResolveConfig(options, env, c->profile_));
  RCKPT_ASSIGN_OR_RETURN(c->http_, HttpClient::Create(options.max_requests, c->config_.ca_file));
  c->credentials_ = MakeCredentialsProvider(options, env, c->profile_, c->http_.get());
  return c;
}

std::string S3Client::RegionOf(const std::string& bucket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = bucket_region_.find(bucket);
  return it == bucket_region_.end() ? config_.region : it->second;
}

Result<Endpoint> S3Client::EndpointFor(const std::string& region) const {
  if (config_.endpoint.custom) return config_.endpoint;
  return AwsEndpoint(region, config_.variant);
}

std::string S3Client::Url(const S3Call& call, const Endpoint& endpoint, std::string* host,
                          std::string* canonical_uri) const {
  const bool path_style = UsesPathStyle(config_, call.bucket);
  *host = path_style ? endpoint.Authority() : call.bucket + "." + endpoint.Authority();
  const std::string key = UriEncode(call.key, /*encode_slash=*/false);
  if (path_style) {
    *canonical_uri = "/" + call.bucket + (call.key.empty() ? "" : "/" + key);
  } else {
    *canonical_uri = "/" + key;
  }
  const std::string query = CanonicalQueryString(call.query);
  return endpoint.scheme + "://" + *host + *canonical_uri + (query.empty() ? "" : "?" + query);
}

int S3Client::BackoffMs(int attempt) const {
  // Full jitter: a random time up to the exponential bound, so clients
  // throttled together do not come back together.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int shift = std::min(attempt - 1, 30);
  const int64_t bound = std::min<int64_t>(options_.retry_max_delay_ms,
                                          int64_t{options_.retry_base_delay_ms} << shift);
  if (bound <= 0) return 0;
  return static_cast<int>(std::uniform_int_distribution<int64_t>(0, bound)(rng));
}

Status S3Client::Prepare(const S3Call& call, Attempt& a) {
  Result<Credentials> creds = credentials_->Get(false);
  if (!creds.ok()) {
    const std::string url = "s3://" + call.bucket + "/" + call.key;
    return creds.status().WithContext(std::string(call.op) + " '" + url + "'");
  }
  a.creds = std::move(*creds);
  a.region = RegionOf(call.bucket);
  Result<Endpoint> endpoint = EndpointFor(a.region);
  if (!endpoint.ok()) {
    const std::string url = "s3://" + call.bucket + "/" + call.key;
    return endpoint.status().WithContext(std::string(call.op) + " '" + url + "'");
  }
  std::string host, canonical_uri;
  a.request = HttpRequest{};
  a.request.method = call.method;
  a.request.url = Url(call, *endpoint, &host, &canonical_uri);
  a.request.body = call.body;
  a.request.into = call.into;
  a.request.connect_timeout_ms = options_.connect_timeout_ms;
  a.request.stall_timeout_s = options_.stall_timeout_s;
  const std::string payload = !call.body_sha256.empty() ? call.body_sha256
                              : call.body.empty()       ? std::string(kEmptySha256)
                                                        : std::string("UNSIGNED-PAYLOAD");
  KeyValues headers = {
      {"host", host}, {"x-amz-content-sha256", payload}, {"x-amz-date", AmzDate(clock_.Now())}};
  if (!a.creds.session_token.empty()) {
    headers.emplace_back("x-amz-security-token", a.creds.session_token);
  }
  for (const auto& h : call.headers) headers.push_back(h);
  if (call.if_none_match) headers.emplace_back("if-none-match", "*");
  SigningRequest signing{call.method, canonical_uri, call.query, headers, payload};
  const std::string authorization = Authorization(a.creds.access_key_id, a.creds.secret_access_key,
                                                  headers[2].second, a.region, "s3", signing);
  // curl sends the Host header from the URL, exactly as signed.
  a.request.headers.assign(headers.begin() + 1, headers.end());
  a.request.headers.emplace_back("Authorization", authorization);
  ++a.sends;
  return Status::Ok();
}

bool S3Client::Judge(const S3Call& call, Attempt& a, HttpResponse r) {
  if (r.status > 0) answered_ = true;
  auto retry = [&](bool allowed) {
    ++a.counted;
    if (!allowed || a.counted >= options_.max_attempts) {
      a.result = Failure(call, a, r);
      return true;
    }
    a.delay_ms = BackoffMs(a.counted);
    return false;
  };
  switch (r.error) {
    case TransportError::kNone:
      break;
    case TransportError::kTls:
    case TransportError::kTooLong:
      a.result = Failure(call, a, r);
      return true;
    case TransportError::kConnect:
      // Nothing was sent: safe to repeat for any request.
      if (!answered_ && a.counted + 1 >= kFirstConnectTries) {
        ++a.counted;
        a.result = Failure(call, a, r);
        return true;
      }
      return retry(true);
    case TransportError::kTimeout:
    case TransportError::kBroken:
      return retry(call.idempotent);
  }
  if (std::find(call.answers.begin(), call.answers.end(), r.status) != call.answers.end()) {
    a.result = std::move(r);
    return true;
  }
  if (r.status >= 200 && r.status < 300) {
    if (call.exact && r.into_bytes != call.into.size()) {
      r.error = TransportError::kBroken;
      r.error_text = "the answer had " + std::to_string(r.into_bytes) + " of the " +
                     std::to_string(call.into.size()) + " bytes asked for";
      return retry(call.idempotent);
    }
    if (call.error_in_200) {
      Result<CompleteAnswer> answer = ParseCompleteAnswer(r.body);
      if (answer.ok() && answer->failed) {
        // CompleteMultipartUpload with the same parts is safe to repeat.
        const bool transient = answer->error.code == "InternalError" ||
                               IsThrottle(503, answer->error.code) ||
                               answer->error.code == "RequestTimeout";
        return retry(transient);
      }
    }
    a.result = std::move(r);
    return true;
  }
  const ErrorBody e = ParseErrorBody(r.body);
  // A region hint: the bucket lives elsewhere. Followed once, not counted.
  std::string hinted = e.region;
  if (const std::string* h = r.Header("x-amz-bucket-region")) hinted = *h;
  // A HEAD has no body to give a code: its 400 with the header is the hint
  // (botocore's redirector reads it so).
  const bool wrong_region = r.status == 301 || e.code == "PermanentRedirect" ||
                            e.code == "AuthorizationHeaderMalformed" ||
                            e.code == "IllegalLocationConstraintException" ||
                            (r.status == 400 && call.method == "HEAD");
  if (wrong_region && !hinted.empty() && hinted != a.region && !a.redirected) {
    a.redirected = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      bucket_region_[call.bucket] = hinted;
    }
    a.delay_ms = 0;
    return false;
  }
  // The server refused the request's time: signed again with the server's
  // clock, once, as the AWS SDKs do; later requests keep the offset.
  if (!a.reclocked && r.error == TransportError::kNone) {
    const std::string* date = r.Header("date");
    if (clock_.Correct(r.status, e.code, date == nullptr ? "" : *date)) {
      a.reclocked = true;
      a.delay_ms = 0;
      return false;
    }
  }
  if (IsExpiredToken(e.code) && !a.refreshed) {
    a.refreshed = true;
    (void)credentials_->Get(/*refresh=*/true);
    a.delay_ms = 0;
    return false;
  }
  if (IsThrottle(r.status, e.code)) return retry(true);
  // Another conditional write of the key was in progress (AWS): the server
  // asks for the request again, which then finds the key taken or free.
  if (r.status == 409 && e.code == "ConditionalRequestConflict") return retry(true);
  if (r.status >= 500 || e.code == "RequestTimeout" || e.code == "InternalError") {
    return retry(call.idempotent);
  }
  a.result = Failure(call, a, r);
  return true;
}

Status S3Client::Failure(const S3Call& call, const Attempt& a, const HttpResponse& r) const {
  const std::string url = "s3://" + call.bucket + "/" + call.key;
  const std::string name = call.key.empty() ? "bucket '" + call.bucket + "'" : "'" + url + "'";
  ErrorBody e = ParseErrorBody(r.body);
  if (call.error_in_200 && r.status >= 200 && r.status < 300) {
    Result<CompleteAnswer> answer = ParseCompleteAnswer(r.body);
    if (answer.ok()) e = answer->error;
  }
  std::string last = Described(r, e);
  if (call.error_in_200 && r.status >= 200 && r.status < 300 && r.error == TransportError::kNone) {
    last = "HTTP " + std::to_string(r.status) + " with an error: " + e.code +
           (e.message.empty() ? "" : ": " + e.message);
  }
  const std::string tries = a.counted > 1 ? ", after " + std::to_string(a.counted) + " tries" : "";
  const std::string op_at = std::string(call.op) + " " + name;
  const std::string who = "access key id " + a.creds.access_key_id + " from " + a.creds.source;
  if (r.error != TransportError::kNone) {
    const Result<Endpoint> ep = EndpointFor(a.region);
    const std::string at = ep.ok() ? ep->scheme + "://" + ep->Authority() : a.region;
    switch (r.error) {
      case TransportError::kConnect:
        return Status::IoError(op_at + ": cannot connect to " + at + ": " + last + tries);
      case TransportError::kTls:
        return Status::IoError(op_at + ": the certificate of " + at + " is not trusted (" + last +
                               "): give the CA bundle as AWS_CA_BUNDLE or S3Options::ca_file");
      case TransportError::kTimeout:
        return Status::IoError(op_at + ": no answer from " + at + " (" + last + ")" + tries);
      default:
        return Status::IoError(op_at + ": " + last + tries);
    }
  }
  const std::string what = " (" + std::string(call.op) + ": " + last + tries + ")";
  if (e.code == "NoSuchBucket") {
    return Status::NotFound("bucket '" + call.bucket + "' does not exist" + what);
  }
  if (e.code == "NoSuchKey" || (r.status == 404 && e.code.empty() && !call.key.empty())) {
    return Status::NotFound(name + " does not exist" + what);
  }
  if (e.code == "NoSuchUpload") {
    return Status::NotFound("the multipart upload of " + name + " no longer exists" + what);
  }
  if (r.status == 412 && call.if_none_match) {
    return Status::AlreadyExists(name + " already exists (written with If-None-Match: *, " +
                                 "which never replaces an object)" + what);
  }
  if (r.status == 412 && !call.precondition_failed.empty()) {
    return Status::IoError(call.precondition_failed + what);
  }
  if (e.code == "RequestTimeTooSkewed" || e.code == "RequestExpired" ||
      e.code == "RequestInTheFuture") {
    const std::string by = a.reclocked ? "signed again by the server's Date, " +
                                             std::to_string(clock_.offset_s()) +
                                             " s from this host's"
                                       : "the answer had no Date to correct it by";
    return Status::IoError("the server refused the time " + op_at + " was signed at" + what +
                           ": this host's clock is off (" + by + "): set it by NTP");
  }
  if (e.code == "SignatureDoesNotMatch") {
    return Status::IoError("the server refused the signature of " + op_at + what +
                           ": the secret access key does not belong to the " + who);
  }
  if (e.code == "InvalidAccessKeyId") {
    return Status::IoError("the server does not know the " + who + what);
  }
  if (IsExpiredToken(e.code) || e.code == "InvalidToken") {
    return Status::IoError("the session token that comes with the " + who +
                           " has expired or is invalid" + what + ": get new temporary credentials");
  }
  if (e.code == "AccessDenied" || (r.status == 403 && e.code.empty())) {
    // AWS refuses to say whether a key exists to an identity that may not
    // list the bucket: a missing key is 403 then, not 404.
    std::string message = "access denied to " + name + what + ": the " + who +
                          " lacks the permission";
    if (!call.key.empty() && (call.method == "GET" || call.method == "HEAD")) {
      message.append(", or the key does not exist and the ").append(who);
      message.append(" lacks s3:ListBucket on bucket '").append(call.bucket);
      message.append("' (S3 then answers 403, not 404)");
    }
    return Status::IoError(message);
  }
  std::string hinted = e.region;
  if (const std::string* h = r.Header("x-amz-bucket-region")) hinted = *h;
  if (!hinted.empty() && hinted != a.region) {
    return Status::IoError("bucket '" + call.bucket + "' is in region '" + hinted + "', not '" +
                           a.region + "'" + what + ": set AWS_REGION=" + hinted +
                           " or S3Options::region");
  }
  return Status::IoError(op_at + ": " + last + tries);
}

Result<HttpResponse> S3Client::Execute(const S3Call& call) {
  Attempt a;
  for (;;) {
    RCKPT_RETURN_IF_ERROR(Prepare(call, a));
    if (Judge(call, a, http_->Perform(a.request))) return std::move(*a.result);
    if (a.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
  }
}

Status S3Client::ExecuteAll(std::span<const S3Call> calls) {
  std::vector<Attempt> attempts(calls.size());
  Status first;
  size_t open = calls.size();
  while (open > 0) {
    // Start every try that is due.
    const auto now = SteadyClock::now();
    bool any_inflight = false;
    auto next_due = SteadyClock::time_point::max();
    for (size_t i = 0; i < calls.size(); ++i) {
      Attempt& a = attempts[i];
      if (a.result || a.inflight) {
        any_inflight = any_inflight || a.inflight != nullptr;
        continue;
      }
      if (!first.ok()) {  // one failed: the rest are not started again
        a.result = Result<HttpResponse>(first);
        --open;
        continue;
      }
      if (a.not_before > now) {
        next_due = std::min(next_due, a.not_before);
        continue;
      }
      if (Status s = Prepare(calls[i], a); !s.ok()) {
        a.result = Result<HttpResponse>(s);
        --open;
        if (first.ok()) first = s;
        continue;
      }
      a.inflight = http_->Start(a.request);
      any_inflight = true;
    }
    if (!any_inflight) {
      if (open > 0 && next_due != SteadyClock::time_point::max()) {
        std::this_thread::sleep_until(next_due);
      }
      continue;
    }
    // Wait for the first try in flight, in order.
    for (size_t i = 0; i < calls.size(); ++i) {
      Attempt& a = attempts[i];
      if (!a.inflight) continue;
      HttpResponse r = HttpClient::Wait(*a.inflight);
      a.inflight.reset();
      if (Judge(calls[i], a, std::move(r))) {
        --open;
        if (!a.result->ok() && first.ok()) first = a.result->status();
      } else {
        a.not_before = SteadyClock::now() + std::chrono::milliseconds(a.delay_ms);
      }
      break;
    }
  }
  return first;
}

}  // namespace rckpt::s3
