// HTTPS endpoints: the server's certificate is verified, against the
// system's CAs or the bundle given, never skipped. The TLS server is
// OpenSSL's own `openssl s_server` with a certificate made for the test (it
// speaks HTTP, not S3: what is tested is the handshake).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "rckpt/io.h"
#include "rckpt/s3.h"
#include "s3/s3_test_env.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool Listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(TlsTest, TheCertificateIsVerifiedAgainstTheCaBundleGiven) {
  if (!std::filesystem::exists("/usr/bin/openssl")) {
    GTEST_SKIP() << "/usr/bin/openssl is missing (Debian: apt-get install openssl)";
  }
  const std::string dir = testing::NewTempDir("tls");
  testing::ProcessResult made = testing::RunProcess(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
       dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "1", "-subj", "/CN=localhost",
       "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"},
      {});
  ASSERT_EQ(made.status, 0) << made.err;
  int port = 0;
  pid_t server = -1;
  for (int attempt = 0; attempt < 5 && server < 0; ++attempt) {
    port = FreePort();
    const pid_t pid = testing::SpawnWithEnv(
        {"/usr/bin/openssl", "s_server", "-accept", std::to_string(port), "-cert",
         dir + "/cert.pem", "-key", dir + "/key.pem", "-www", "-quiet"},
        {}, dir + "/out", dir + "/err");
    for (int i = 0; i < 200 && !Listening(port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (Listening(port)) {
      server = pid;
    } else {
      ::kill(pid, SIGKILL);
      testing::WaitExit(pid);
    }
  }
  ASSERT_GT(server, 0) << testing::ReadAll(dir + "/err");
  S3Options o;
  o.endpoint = "https://127.0.0.1:" + std::to_string(port);
  o.credentials = S3Credentials{"KEY", "SECRET", ""};
  o.read_environment = false;
  o.max_attempts = 2;
  o.retry_base_delay_ms = 1;
  o.retry_max_delay_ms = 1;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> untrusted, NewS3FileSystem(o));
  Result<Checkpoint> got = Load("s3://b/k.rckpt", {.fs = untrusted.get()});
  EXPECT_THAT(got, StatusIs(StatusCode::kIoError, "the certificate of " + o.endpoint +
                                                      " is not trusted"));
  EXPECT_THAT(got.status().message(), HasSubstr("AWS_CA_BUNDLE"));
  // Trusted through the bundle, the handshake passes: what answers is not S3.
  o.ca_file = dir + "/cert.pem";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> trusted, NewS3FileSystem(o));
  got = Load("s3://b/k.rckpt", {.fs = trusted.get()});
  EXPECT_EQ(got.status().code(), StatusCode::kIoError);
  EXPECT_THAT(got.status().message(), ::testing::Not(HasSubstr("not trusted")));
  EXPECT_THAT(got.status().message(), HasSubstr("carries no ETag"));
  ::kill(server, SIGKILL);
  testing::WaitExit(server);
}

}  // namespace
}  // namespace rckpt
