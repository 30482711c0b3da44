#include "s3/credentials.h"

#include <arpa/inet.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>

#include "s3/json_fields.h"

namespace rckpt::s3 {
namespace {

// Temporary credentials are renewed this long before they expire.
constexpr int64_t kRenewBeforeSeconds = 300;

constexpr const char* kImdsEndpoint = "http://169.254.169.254";
constexpr const char* kContainerHost = "http://169.254.170.2";

class StaticProvider final : public CredentialsProvider {
 public:
  explicit StaticProvider(Credentials c) : c_(std::move(c)) {}
  Result<Credentials> Get(bool) override { return c_; }
  Result<std::string> Source() const override { return c_.source; }

 private:
  const Credentials c_;
};

// Every Get fails with the same error: the chain found a configuration
// rckpt cannot use, and says so at the first request.
class FailingProvider final : public CredentialsProvider {
 public:
  explicit FailingProvider(Status s) : s_(std::move(s)) {}
  Result<Credentials> Get(bool) override { return s_; }
  Result<std::string> Source() const override { return s_; }

 private:
  const Status s_;
};

// Credentials fetched over HTTP, cached until five minutes before they
// expire. While a renewal fails, unexpired credentials are still used.
class FetchingProvider final : public CredentialsProvider {
 public:
  FetchingProvider(std::string source, std::function<Result<Credentials>()> fetch, Clock clock)
      : source_(std::move(source)), fetch_(std::move(fetch)), clock_(clock) {}

  Result<std::string> Source() const override { return source_; }

  Result<Credentials> Get(bool refresh) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_();
    const bool fresh = cached_ && (cached_->expires_unix == 0 ||
                                   now < cached_->expires_unix - kRenewBeforeSeconds);
    if (fresh && !refresh) return *cached_;
    Result<Credentials> got = fetch_();
    if (got.ok()) {
      cached_ = *got;
      return got;
    }
    if (cached_ && !refresh && (cached_->expires_unix == 0 || now < cached_->expires_unix)) {
      return *cached_;
    }
    return got.status();
  }

 private:
  std::mutex mu_;
  const std::string source_;
  const std::function<Result<Credentials>()> fetch_;
  const Clock clock_;
  std::optional<Credentials> cached_;
};

// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} as the container
// endpoint and instance metadata answer.
Result<Credentials> CredentialsFromJson(const std::string& body, const std::string& source) {
  Result<std::map<std::string, std::string>> fields = ParseJsonFields(body);
  if (!fields.ok()) {
    return Status::IoError(source + " answered something other than credentials (" +
                           fields.status().message() + ")");
  }
  Credentials c;
  c.source = source;
  auto take = [&](const char* name, std::string* out, bool required) -> Status {
    auto it = fields->find(name);
    if (it == fields->end() || it->second.empty()) {
      if (!required) return Status::Ok();
      return Status::IoError(source + " answered without " + name);
    }
    *out = it->second;
    return Status::Ok();
  };
  RCKPT_RETURN_IF_ERROR(take("AccessKeyId", &c.access_key_id, true));
  RCKPT_RETURN_IF_ERROR(take("SecretAccessKey", &c.secret_access_key, true));
  RCKPT_RETURN_IF_ERROR(take("Token", &c.session_token, false));
  std::string expiration;
  RCKPT_RETURN_IF_ERROR(take("Expiration", &expiration, false));
  if (!expiration.empty()) {
    Result<int64_t> t = ParseIso8601Utc(expiration);
    if (!t.ok()) return Status::IoError(source + ": Expiration " + t.status().message());
    c.expires_unix = *t;
  }
  return c;
}

std::string DescribeFailure(const HttpResponse& r) {
  if (r.error != TransportError::kNone) return r.error_text;
  return "HTTP " + std::to_string(r.status);
}

Result<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot read " + what + " '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The container endpoint (ECS, EKS Pod Identity): a GET of a JSON document,
// with an Authorization header when one is configured.
Result<Credentials> FetchContainerCredentials(HttpClient& http, const std::string& url,
                                              const Environment& env) {
  const std::string source = "the container credentials endpoint " + RedactedUrl(url);
  HttpRequest req;
  req.url = url;
  req.no_proxy = true;
  req.connect_timeout_ms = 2000;
  req.stall_timeout_s = 5;
  if (std::optional<std::string> file = env.Get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
    RCKPT_ASSIGN_OR_RETURN(std::string token,
                           ReadWholeFile(*file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
    req.headers.emplace_back("Authorization", token);
  } else if (std::optional<std::string> token = env.Get("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
    req.headers.emplace_back("Authorization", *token);
  }
  HttpResponse r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = http.Perform(req);
    if (r.error == TransportError::kNone && r.status < 500) break;
  }
  if (!r.ok()) return Status::IoError(source + " failed: " + DescribeFailure(r));
  return CredentialsFromJson(r.body, source);
}

// EC2 instance metadata: IMDSv2 (a session token by PUT, sent with every
// GET), the role's name, then its credentials. When the token request
// fails otherwise than by a refused connection or a 400 (a 403, 404 or 405
// from an IMDS without v2, a timeout, a 5xx), the GETs are sent without a
// token (IMDSv1), as botocore and the AWS CLI do, unless `v1_disabled`: a
// container on an instance whose PUT response hop limit is 1 never gets
// the token's answer, while its GETs are answered.
Result<Credentials> FetchInstanceCredentials(HttpClient& http, const std::string& endpoint,
                                             bool v1_disabled) {
  std::string source = "EC2 instance metadata at " + endpoint;
  auto request = [&](const std::string& method, const std::string& path,
                     std::vector<std::pair<std::string, std::string>> headers, int tries) {
    HttpRequest req;
    req.method = method;
    req.url = endpoint + path;
    req.headers = std::move(headers);
    req.no_proxy = true;
    req.connect_timeout_ms = 1000;
    req.stall_timeout_s = 2;
    HttpResponse r;
    for (int attempt = 0; attempt < tries; ++attempt) {
      r = http.Perform(req);
      if (r.error != TransportError::kTimeout && r.error != TransportError::kBroken &&
          r.status < 500) {
        break;
      }
    }
    return r;
  };
  // One try: a timeout here is the hop limit, not a busy endpoint.
  const HttpResponse token = request(
      "PUT", "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}}, 1);
  std::vector<std::pair<std::string, std::string>> auth;
  if (token.ok()) {
    auth = {{"X-aws-ec2-metadata-token", token.body}};
  } else {
    const std::string why = source + " gave no session token: " + DescribeFailure(token);
    const std::string hop =
        token.error == TransportError::kTimeout
            ? " (a container on an instance whose metadata PUT response hop limit is 1 never "
              "gets the token's answer: raise it to 2)"
            : "";
    if (token.error == TransportError::kConnect || token.status == 400) {
      return Status::IoError(why);
    }
    if (v1_disabled) {
      return Status::IoError(why + hop + ", and IMDSv1 is disabled (AWS_EC2_METADATA_V1_DISABLED "
                                         "or ec2_metadata_v1_disabled)");
    }
    source += " (IMDSv1: the token request failed with " + DescribeFailure(token) + ")";
  }
  HttpResponse roles = request("GET", "/latest/meta-data/iam/security-credentials/", auth, 2);
  if (!roles.ok()) {
    return Status::IoError(source + " names no IAM role (" + DescribeFailure(roles) +
                           "): attach an instance profile to the instance");
  }
  std::string role = roles.body.substr(0, roles.body.find('\n'));
  while (!role.empty() && (role.back() == '\r' || role.back() == ' ')) role.pop_back();
  if (role.empty()) return Status::IoError(source + " names no IAM role");
  HttpResponse creds =
      request("GET", "/latest/meta-data/iam/security-credentials/" + role, auth, 2);
  if (!creds.ok()) {
    return Status::IoError(source + " gave no credentials for role '" + role +
                           "': " + DescribeFailure(creds));
  }
  return CredentialsFromJson(creds.body, source + " (role '" + role + "')");
}

// The container endpoint's URL may only be plain HTTP on a loopback or
// AWS's link-local addresses: the token it is sent must not leave the host.
Status CheckContainerUrl(const std::string& url) {
  Result<Endpoint> e = ParseEndpoint(url.substr(0, url.find('/', url.find("://") + 3)),
                                     "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!e.ok()) return e.status();
  if (e->scheme == "https") return Status::Ok();
  const std::string& h = e->host;
  // A loopback address itself, not a name that merely starts like one
  // ("127.attacker.example").
  in_addr v4{};
  const bool loopback_v4 =
      ::inet_pton(AF_INET, h.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
  if (h == "localhost" || loopback_v4 || h == "[::1]" || h == "169.254.170.2" ||
      h == "169.254.170.23" || h == "[fd00:ec2::23]") {
    return Status::Ok();
  }
  return Status::InvalidArgument("AWS_CONTAINER_CREDENTIALS_FULL_URI '" + RedactedUrl(url) +
                                 "': plain http is allowed only to a loopback address or "
                                 "AWS's container endpoints (169.254.170.2, 169.254.170.23)");
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::unique_ptr<CredentialsProvider> MakeCredentialsProvider(const S3Options& options,
                                                             const Environment& env,
                                                             const Profile& profile,
                                                             HttpClient* http, Clock clock) {
  auto fail = [](Status s) -> std::unique_ptr<CredentialsProvider> {
    return std::make_unique<FailingProvider>(std::move(s));
  };
  if (options.credentials) {
    const S3Credentials& given = *options.credentials;
    if (given.access_key_id.empty() || given.secret_access_key.empty()) {
      return fail(Status::InvalidArgument(
          "S3Options::credentials needs both access_key_id and secret_access_key"));
    }
    return std::make_unique<StaticProvider>(Credentials{
        given.access_key_id, given.secret_access_key, given.session_token, 0,
        "S3Options::credentials"});
  }
  if (options.credentials_source) {
    const std::function<Result<S3Credentials>()> source = options.credentials_source;
    const std::string name = options.credentials_source_name.empty()
                                 ? "credentials_source"
                                 : options.credentials_source_name;
    return std::make_unique<FetchingProvider>(
        name,
        [source, name]() -> Result<Credentials> {
          RCKPT_ASSIGN_OR_RETURN(S3Credentials c, source());
          if (c.access_key_id.empty() || c.secret_access_key.empty()) {
            return Status::IoError(name + " gave no access key id or no secret access key");
          }
          return Credentials{std::move(c.access_key_id), std::move(c.secret_access_key),
                             std::move(c.session_token), c.expires_unix, name};
        },
        clock);
  }
  // 1. The environment.
  const std::optional<std::string> id = env.Get("AWS_ACCESS_KEY_ID");
  const std::optional<std::string> secret = env.Get("AWS_SECRET_ACCESS_KEY");
  if (id || secret) {
    if (!id || !secret) {
      return fail(Status::InvalidArgument(
          std::string(id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") + " is not set, but " +
          (id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
          " is: set both (and AWS_SESSION_TOKEN for temporary credentials)"));
    }
    return std::make_unique<StaticProvider>(
        Credentials{*id, *secret, env.Get("AWS_SESSION_TOKEN").value_or(""), 0, "environment"});
  }
  // 2. The profile.
  const std::string where = "'" + profile.credentials_path + "' or '" + profile.config_path + "'";
  if (const std::string* key = profile.Find("aws_access_key_id")) {
    const std::string* s = profile.Find("aws_secret_access_key");
    if (s == nullptr || s->empty()) {
      return fail(Status::InvalidArgument("profile '" + profile.name +
                                          "' has aws_access_key_id but no "
                                          "aws_secret_access_key (in " +
                                          where + ")"));
    }
    const std::string* token = profile.Find("aws_session_token");
    return std::make_unique<StaticProvider>(
        Credentials{*key, *s, token ? *token : "", 0, "profile '" + profile.name + "'"});
  }
  for (const char* setting : {"credential_process", "role_arn", "sso_session", "sso_start_url",
                              "web_identity_token_file"}) {
    if (profile.Find(setting) == nullptr) continue;
    return fail(Status::Unsupported(
        "profile '" + profile.name + "' gets its credentials through " + setting +
        ", which rckpt's C++ library does not resolve: export them first (`eval \"$(aws "
        "configure export-credentials --profile " +
        profile.name +
        " --format env)\"`), pass them in S3Options, or use rckpt's Python package, which "
        "resolves them with botocore when it is installed"));
  }
  if (profile.named_by_user && !profile.found) {
    return fail(
        Status::InvalidArgument("AWS profile '" + profile.name + "' is in neither " + where));
  }
  // 3. The container endpoint.
  std::optional<std::string> container = env.Get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!container) {
    if (std::optional<std::string> relative = env.Get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
      container = std::string(kContainerHost) + *relative;
    }
  }
  if (container) {
    if (Status s = CheckContainerUrl(*container); !s.ok()) return fail(s);
    const std::string url = *container;
    return std::make_unique<FetchingProvider>(
        "container endpoint",
        [http, url, &env] { return FetchContainerCredentials(*http, url, env); }, clock);
  }
  if (env.Get("AWS_WEB_IDENTITY_TOKEN_FILE")) {
    return fail(Status::Unsupported(
        "AWS_WEB_IDENTITY_TOKEN_FILE is set (web identity, as on EKS with IRSA), which rckpt's "
        "C++ library does not resolve: export the credentials first (`eval \"$(aws configure "
        "export-credentials --format env)\"`), or use rckpt's Python package, which resolves "
        "them with botocore when it is installed"));
  }
  // 4. EC2 instance metadata.
  const std::string nothing_else =
      "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, profile '" +
      profile.name + "' has none (in " + where + "), no container credentials endpoint is set";
  if (Lower(env.Get("AWS_EC2_METADATA_DISABLED").value_or("")) == "true") {
    return fail(Status::IoError(nothing_else + ", and instance metadata is disabled "
                                               "(AWS_EC2_METADATA_DISABLED)"));
  }
  std::string endpoint = env.Get("AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or(kImdsEndpoint);
  while (endpoint.ends_with('/')) endpoint.pop_back();
  const std::string* v1_setting = profile.Find("ec2_metadata_v1_disabled");
  const bool v1_disabled =
      Lower(env.Get("AWS_EC2_METADATA_V1_DISABLED").value_or(v1_setting ? *v1_setting : "")) ==
      "true";
  return std::make_unique<FetchingProvider>(
      "instance metadata",
      [http, endpoint, nothing_else, v1_disabled]() -> Result<Credentials> {
        Result<Credentials> c = FetchInstanceCredentials(*http, endpoint, v1_disabled);
        if (!c.ok()) return Status::IoError(nothing_else + ", and " + c.status().message());
        return c;
      },
      clock);
}

}  // namespace rckpt::s3
