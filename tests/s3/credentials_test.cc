// The AWS credential chain: environment, profile files, the container
// endpoint and EC2 instance metadata (IMDSv2), the last two served by a
// small local HTTP server standing in for AWS's metadata endpoints.
#include "s3/credentials.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace rckpt::s3 {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// One HTTP/1.1 request per connection, answered by `handler`.
class MetadataServer {
 public:
  struct Request {
    std::string method, path;
    std::map<std::string, std::string> headers;  // lower-case names

    std::string Header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };
  struct Reply {
    int status = 200;
    std::string body;
    bool hang = false;  // never answered (the connection stays open until the end)
  };

  explicit MetadataServer(std::function<Reply(const Request&)> handler)
      : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~MetadataServer() {
    stop_ = true;
    thread_.join();
    for (const int c : hung_) ::close(c);
    ::close(fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int hits() const { return hits_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t got = ::read(c, buf, sizeof buf);
        if (got <= 0) break;
        in.append(buf, static_cast<size_t>(got));
      }
      Request r;
      const size_t sp1 = in.find(' '), sp2 = in.find(' ', sp1 + 1);
      r.method = in.substr(0, sp1);
      r.path = in.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t at = in.find("\r\n") + 2;
      while (at < in.size()) {
        const size_t eol = in.find("\r\n", at);
        if (eol == at || eol == std::string::npos) break;
        const std::string line = in.substr(at, eol - at);
        const size_t colon = line.find(':');
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
        at = eol + 2;
      }
      ++hits_;
      const Reply reply = handler_(r);
      if (reply.hang) {
        hung_.push_back(c);
        continue;
      }
      const std::string out = "HTTP/1.1 " + std::to_string(reply.status) +
                              " X\r\nContent-Length: " + std::to_string(reply.body.size()) +
                              "\r\nConnection: close\r\n\r\n" + reply.body;
      (void)!::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::function<Reply(const Request&)> handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> hits_{0};
  std::vector<int> hung_;  // connections never answered
  std::thread thread_;
};

std::string CredentialsJson(const std::string& id, const std::string& expiration) {
  return R"({"Code": "Success", "AccessKeyId": ")" + id +
         R"(", "SecretAccessKey": "TOPSECRET", "Token": "SESSIONTOKEN", "Expiration": ")" +
         expiration + "\"}";
}

std::unique_ptr<HttpClient> Http() {
  Result<std::unique_ptr<HttpClient>> h = HttpClient::Create(4, "");
  EXPECT_TRUE(h.ok());
  return std::move(*h);
}

Profile NoProfile() {
  Profile p;
  p.name = "default";
  p.config_path = "/nonexistent/config";
  p.credentials_path = "/nonexistent/credentials";
  return p;
}

TEST(CredentialsTest, ExplicitThenEnvironmentThenProfile) {
  auto http = Http();
  S3Options o;
  o.credentials = S3Credentials{"EXPLICIT", "s", ""};
  MapEnvironment env({{"AWS_ACCESS_KEY_ID", "ENVKEY"},
                      {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                      {"AWS_SESSION_TOKEN", "envtoken"}});
  Profile profile = NoProfile();
  profile.settings = {{"aws_access_key_id", "PROFILEKEY"}, {"aws_secret_access_key", "p"}};
  ASSERT_OK_AND_ASSIGN(Credentials c, MakeCredentialsProvider(o, env, profile, http.get())->Get());
  EXPECT_EQ(c.access_key_id, "EXPLICIT");
  ASSERT_OK_AND_ASSIGN(c, MakeCredentialsProvider(S3Options{}, env, profile, http.get())->Get());
  EXPECT_EQ(c.access_key_id, "ENVKEY");
  EXPECT_EQ(c.session_token, "envtoken");
  EXPECT_EQ(c.source, "environment");
  ASSERT_OK_AND_ASSIGN(
      c, MakeCredentialsProvider(S3Options{}, MapEnvironment(), profile, http.get())->Get());
  EXPECT_EQ(c.access_key_id, "PROFILEKEY");
  EXPECT_EQ(c.source, "profile 'default'");
}

TEST(CredentialsTest, IncompleteOrUnusableConfigurationsSayWhat) {
  auto http = Http();
  MapEnvironment half({{"AWS_ACCESS_KEY_ID", "ENVKEY"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, half, NoProfile(), http.get())->Get(),
              StatusIs(StatusCode::kInvalidArgument, "AWS_SECRET_ACCESS_KEY is not set"));
  Profile process = NoProfile();
  process.name = "sso";
  process.settings = {{"credential_process", "/bin/get-creds --secret"}};
  Result<Credentials> c =
      MakeCredentialsProvider(S3Options{}, MapEnvironment(), process, http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kUnsupported,
                          "profile 'sso' gets its credentials through credential_process"));
  EXPECT_THAT(c.status().message(), HasSubstr("aws configure export-credentials"));
  Profile missing = NoProfile();
  missing.name = "nope";
  missing.named_by_user = true;
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, MapEnvironment(), missing, http.get())->Get(),
              StatusIs(StatusCode::kInvalidArgument, "AWS profile 'nope' is in neither"));
  MapEnvironment disabled({{"AWS_EC2_METADATA_DISABLED", "true"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, disabled, NoProfile(), http.get())->Get(),
              StatusIs(StatusCode::kIoError,
                       "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are "
                       "not set"));
  MapEnvironment irsa({{"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, irsa, NoProfile(), http.get())->Get(),
              StatusIs(StatusCode::kUnsupported, "AWS_WEB_IDENTITY_TOKEN_FILE is set"));
  // The container token goes over plain http to a loopback address only,
  // never to a name that merely starts like one.
  MapEnvironment lookalike({{"AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             "http://127.attacker.example/creds"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, lookalike, NoProfile(), http.get())->Get(),
              StatusIs(StatusCode::kInvalidArgument, "plain http is allowed only to a loopback"));
  MapEnvironment userinfo({{"AWS_CONTAINER_CREDENTIALS_FULL_URI",
                            "http://user:SeCrEt@127.0.0.1:1/creds"}});
  c = MakeCredentialsProvider(S3Options{}, userinfo, NoProfile(), http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kInvalidArgument, "'http://***@127.0.0.1:1'"));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("SeCrEt")));
}

TEST(CredentialsTest, ContainerEndpointWithAuthorizationToken) {
  auto http = Http();
  MetadataServer server([](const MetadataServer::Request& r) {
    if (r.path != "/v2/creds" || r.Header("authorization") != "Bearer pod-token") {
      return MetadataServer::Reply{403, "no"};
    }
    return MetadataServer::Reply{200, CredentialsJson("ASIACONTAINER", "2099-01-01T00:00:00Z")};
  });
  const std::string dir = testing::NewTempDir("container-token");
  std::ofstream(dir + "/token") << "Bearer pod-token\n";
  MapEnvironment env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url() + "/v2/creds"},
                      {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir + "/token"}});
  ASSERT_OK_AND_ASSIGN(Credentials c,
                       MakeCredentialsProvider(S3Options{}, env, NoProfile(), http.get())->Get());
  EXPECT_EQ(c.access_key_id, "ASIACONTAINER");
  EXPECT_EQ(c.secret_access_key, "TOPSECRET");
  EXPECT_EQ(c.session_token, "SESSIONTOKEN");
  EXPECT_EQ(c.expires_unix, 4070908800);

  MapEnvironment remote({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, remote, NoProfile(), http.get())->Get(),
              StatusIs(StatusCode::kInvalidArgument, "plain http is allowed only to a loopback"));
}

int64_t g_now = 0;
int64_t FakeClock() { return g_now; }

TEST(CredentialsTest, InstanceMetadataV2IsRenewedBeforeExpiry) {
  auto http = Http();
  std::atomic<int> issued{0};
  MetadataServer server([&](const MetadataServer::Request& r) -> MetadataServer::Reply {
    if (r.method == "PUT" && r.path == "/latest/api/token") {
      if (r.Header("x-aws-ec2-metadata-token-ttl-seconds") != "21600") return {400, ""};
      return {200, "imds-session"};
    }
    if (r.Header("x-aws-ec2-metadata-token") != "imds-session") return {401, ""};
    if (r.path == "/latest/meta-data/iam/security-credentials/") return {200, "trainer-role\n"};
    if (r.path == "/latest/meta-data/iam/security-credentials/trainer-role") {
      // Each issue expires an hour after the fake clock's now.
      ++issued;
      std::time_t t = static_cast<std::time_t>(g_now + 3600);
      std::tm tm{};
      ::gmtime_r(&t, &tm);
      char when[32];
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
      return {200, CredentialsJson("ASIA" + std::to_string(issued.load()), when)};
    }
    return {404, ""};
  });
  MapEnvironment env({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url() + "/"}});
  g_now = 1'700'000'000;
  std::unique_ptr<CredentialsProvider> p =
      MakeCredentialsProvider(S3Options{}, env, NoProfile(), http.get(), FakeClock);
  ASSERT_OK_AND_ASSIGN(Credentials c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA1");
  EXPECT_THAT(c.source, HasSubstr("role 'trainer-role'"));
  g_now += 3000;  // 10 minutes before expiry: still good
  ASSERT_OK_AND_ASSIGN(c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA1");
  g_now += 400;  // within 5 minutes of expiry: renewed
  ASSERT_OK_AND_ASSIGN(c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA2");
  ASSERT_OK_AND_ASSIGN(c, p->Get(/*refresh=*/true));  // the server said it expired
  EXPECT_EQ(c.access_key_id, "ASIA3");
}

TEST(CredentialsTest, UnreachableMetadataFailsNamingEveryPlaceLookedAtWithoutSecrets) {
  auto http = Http();
  MetadataServer server([](const MetadataServer::Request&) {
    return MetadataServer::Reply{500, "TOPSECRET"};
  });
  MapEnvironment env({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url()}});
  Result<Credentials> c = MakeCredentialsProvider(S3Options{}, env, NoProfile(), http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kIoError, "no AWS credentials"));
  EXPECT_THAT(c.status().message(), HasSubstr("no container credentials endpoint is set"));
  EXPECT_THAT(c.status().message(), HasSubstr("the token request failed with HTTP 500"));
  EXPECT_THAT(c.status().message(), HasSubstr("names no IAM role (HTTP 500)"));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("TOPSECRET")));
}

// IMDSv1's plain GETs when the token call fails, as botocore and the AWS CLI
// do: a container behind an instance's PUT response hop limit of 1 never
// gets the token's answer (a hang here), an IMDS without v2 answers 403, 404
// or 405, a busy one 5xx.
TEST(CredentialsTest, InstanceMetadataFallsBackToV1WhenTheTokenCallFails) {
  auto http = Http();
  for (const MetadataServer::Reply& put : {MetadataServer::Reply{.hang = true},
                                          MetadataServer::Reply{403, ""},
                                          MetadataServer::Reply{404, ""},
                                          MetadataServer::Reply{405, ""},
                                          MetadataServer::Reply{503, ""}}) {
    std::atomic<int> tokenless_gets{0};
    MetadataServer server([&](const MetadataServer::Request& r) -> MetadataServer::Reply {
      if (r.method == "PUT" && r.path == "/latest/api/token") return put;
      if (!r.Header("x-aws-ec2-metadata-token").empty()) return {401, ""};
      ++tokenless_gets;
      if (r.path == "/latest/meta-data/iam/security-credentials/") return {200, "v1-role"};
      if (r.path == "/latest/meta-data/iam/security-credentials/v1-role") {
        return {200, CredentialsJson("ASIAV1", "2100-01-01T00:00:00Z")};
      }
      return {404, ""};
    });
    MapEnvironment env({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url()}});
    const std::string put_was = put.hang ? "hang" : std::to_string(put.status);
    Result<Credentials> c =
        MakeCredentialsProvider(S3Options{}, env, NoProfile(), http.get())->Get();
    ASSERT_TRUE(c.ok()) << put_was << ": " << c.status().ToString();
    EXPECT_EQ(c->access_key_id, "ASIAV1") << put_was;
    EXPECT_THAT(c->source, HasSubstr("IMDSv1: the token request failed with")) << put_was;
    EXPECT_THAT(c->source, HasSubstr("role 'v1-role'"));
    EXPECT_EQ(tokenless_gets, 2) << put_was;
  }
}

TEST(CredentialsTest, NoV1FallbackWhenDisabledOrTheTokenRequestIsBad) {
  auto http = Http();
  MetadataServer hangs([](const MetadataServer::Request& r) -> MetadataServer::Reply {
    if (r.method == "PUT") return {.hang = true};
    return {200, "should-not-be-asked"};
  });
  MapEnvironment disabled({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", hangs.url()},
                           {"AWS_EC2_METADATA_V1_DISABLED", "true"}});
  Result<Credentials> c =
      MakeCredentialsProvider(S3Options{}, disabled, NoProfile(), http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kIoError, "gave no session token"));
  EXPECT_THAT(c.status().message(), HasSubstr("PUT response hop limit is 1"));
  EXPECT_THAT(c.status().message(), HasSubstr("IMDSv1 is disabled (AWS_EC2_METADATA_V1_DISABLED"));
  EXPECT_EQ(hangs.hits(), 1);  // the token request alone
  MetadataServer refuses([](const MetadataServer::Request& r) -> MetadataServer::Reply {
    return {r.method == "PUT" ? 400 : 200, "x"};
  });
  Profile profile = NoProfile();
  MapEnvironment env({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", refuses.url()}});
  c = MakeCredentialsProvider(S3Options{}, env, profile, http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kIoError, "gave no session token: HTTP 400"));
  EXPECT_EQ(refuses.hits(), 1);
  // The profile's ec2_metadata_v1_disabled, as the AWS CLI reads it.
  MetadataServer forbids([](const MetadataServer::Request& r) -> MetadataServer::Reply {
    return {r.method == "PUT" ? 403 : 200, "x"};
  });
  profile.settings["ec2_metadata_v1_disabled"] = "true";
  MapEnvironment env2({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", forbids.url()}});
  c = MakeCredentialsProvider(S3Options{}, env2, profile, http.get())->Get();
  EXPECT_THAT(c, StatusIs(StatusCode::kIoError, "gave no session token: HTTP 403"));
  EXPECT_THAT(c.status().message(), HasSubstr("IMDSv1 is disabled"));
  EXPECT_EQ(forbids.hits(), 1);
}

// A caller's source (what rckpt's Python package makes of botocore's
// credentials): asked first, again five minutes before what it gave
// expires, and when the server says the token expired; the chain is not
// consulted.
TEST(CredentialsTest, ACallersSourceIsAskedAgainBeforeExpiry) {
  int calls = 0;
  S3Options o;
  o.credentials_source = [&calls]() -> Result<S3Credentials> {
    ++calls;
    return S3Credentials{"ASIA" + std::to_string(calls), "secret", "token", g_now + 3600};
  };
  o.credentials_source_name = "botocore (sso)";
  MapEnvironment env({{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "s"}});
  g_now = 1'700'000'000;
  std::unique_ptr<CredentialsProvider> p =
      MakeCredentialsProvider(o, env, NoProfile(), nullptr, FakeClock);
  EXPECT_EQ(p->Source().value_or(""), "botocore (sso)");
  EXPECT_EQ(calls, 0);  // Source() asks nothing
  ASSERT_OK_AND_ASSIGN(Credentials c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA1");
  EXPECT_EQ(c.source, "botocore (sso)");
  g_now += 3000;
  ASSERT_OK_AND_ASSIGN(c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA1");
  g_now += 400;
  ASSERT_OK_AND_ASSIGN(c, p->Get());
  EXPECT_EQ(c.access_key_id, "ASIA2");
  ASSERT_OK_AND_ASSIGN(c, p->Get(/*refresh=*/true));
  EXPECT_EQ(c.access_key_id, "ASIA3");

  // A failing source, and one that gives no secret, are errors naming it;
  // credentials it gave earlier are used while they have not expired.
  o.credentials_source = []() -> Result<S3Credentials> {
    return Status::IoError("botocore: the SSO session has expired");
  };
  p = MakeCredentialsProvider(o, env, NoProfile(), nullptr, FakeClock);
  EXPECT_THAT(p->Get(), StatusIs(StatusCode::kIoError, "the SSO session has expired"));
  o.credentials_source = []() -> Result<S3Credentials> { return S3Credentials{"ASIA", "", ""}; };
  p = MakeCredentialsProvider(o, env, NoProfile(), nullptr, FakeClock);
  EXPECT_THAT(p->Get(), StatusIs(StatusCode::kIoError,
                                 "botocore (sso) gave no access key id or no secret access key"));
}

TEST(CredentialsTest, SourceNamesWhereTheChainFindsCredentialsWithoutAsking) {
  S3Options explicit_keys;
  explicit_keys.credentials = S3Credentials{"K", "S", ""};
  EXPECT_EQ(MakeCredentialsProvider(explicit_keys, MapEnvironment(), NoProfile(), nullptr)
                  ->Source().value_or(""),
            "S3Options::credentials");
  MapEnvironment env({{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "s"}});
  EXPECT_EQ(MakeCredentialsProvider(S3Options{}, env, NoProfile(), nullptr)->Source().value_or(""),
            "environment");
  MapEnvironment container({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"}});
  EXPECT_EQ(MakeCredentialsProvider(S3Options{}, container, NoProfile(), nullptr)->Source().value_or(""),
            "container endpoint");
  EXPECT_EQ(MakeCredentialsProvider(S3Options{}, MapEnvironment(), NoProfile(), nullptr)
                  ->Source().value_or(""),
            "instance metadata");
  MapEnvironment irsa({{"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"}});
  EXPECT_THAT(MakeCredentialsProvider(S3Options{}, irsa, NoProfile(), nullptr)->Source(),
              StatusIs(StatusCode::kUnsupported, "AWS_WEB_IDENTITY_TOKEN_FILE is set"));
}

}  // namespace
}  // namespace rckpt::s3
