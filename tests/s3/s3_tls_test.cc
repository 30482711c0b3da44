// S3 over https: the test server's TLS port, its certificate signed by a
// private CA that AWS_CA_BUNDLE names, as a store behind a company's CA is
// reached. Saves and loads go through the transport's several threads
// (parts and ranged GETs in parallel); a CA that did not sign the
// certificate is refused at once, saying which variable to set.
#include <algorithm>
#include <filesystem>
#include <thread>

#include "rckpt/io.h"
#include "rckpt/s3.h"
#include "s3/http.h"
#include "s3/s3_test_env.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::RunProcess;
using testing::S3TestServer;

#define RCKPT_REQUIRE_HTTPS(server)                                                     \
  if ((server).https_endpoint.empty() || (server).ca_bundle.empty()) {                  \
    GTEST_SKIP() << "the S3 test server has no https port "                             \
                    "(RCKPT_TEST_S3_HTTPS_ENDPOINT and "                                \
                    "_CA_BUNDLE unset: an s3.env from an older tests/s3/s3_server.sh)"; \
  }

#ifdef RCKPT_S3_HELPER_PATH
std::vector<std::string> HttpsEnvironment(const S3TestServer& s, const std::string& ca) {
  std::vector<std::string> env = s.AwsEnvironment(s.https_endpoint);
  env.push_back("AWS_CA_BUNDLE=" + ca);
  return env;
}

// 40 MiB: five 8 MiB parts in flight at once, and a load cut into parallel
// ranged GETs, so that every lane of the transport moves TLS traffic.
TEST(S3TlsTest, SaveAndLoadOverHttpsWithAPrivateCa) {
  RCKPT_REQUIRE_S3_SERVER(server);
  RCKPT_REQUIRE_HTTPS(server);
  ASSERT_GE(s3::HttpClient::LanesFor(16), 2);
  const std::string url = server.UniquePrefix() + "tls.rckpt";
  const std::vector<std::string> env = HttpsEnvironment(server, server.ca_bundle);
  ProcessResult r = RunProcess({RCKPT_S3_HELPER_PATH, "save", url, "40", "--seed", "7"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  r = RunProcess({RCKPT_S3_HELPER_PATH, "load", url, "40", "--seed", "7"}, env);
  EXPECT_EQ(r.status, 0) << r.err;
  // The object is the one the plain endpoint sees: one store, two ports.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> plain, NewS3FileSystem(server.Options()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f, plain->OpenForRead(url));
  EXPECT_GT(f->Size(), 40ull << 20);
}

TEST(S3TlsTest, ACaThatDidNotSignTheCertificateIsRefused) {
  RCKPT_REQUIRE_S3_SERVER(server);
  RCKPT_REQUIRE_HTTPS(server);
  if (!std::filesystem::exists("/usr/bin/openssl")) {
    GTEST_SKIP() << "/usr/bin/openssl is missing (Debian: apt-get install openssl)";
  }
  const std::string dir = testing::NewTempDir("other-ca");
  ProcessResult made =
      RunProcess({"/usr/bin/openssl", "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt",
                  "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-keyout",
                  dir + "/ca.key", "-out", dir + "/ca.pem", "-subj", "/CN=another CA"},
                 {});
  ASSERT_EQ(made.status, 0) << made.err;
  const std::string url = server.UniquePrefix() + "refused.rckpt";
  ProcessResult r = RunProcess({RCKPT_S3_HELPER_PATH, "save", url, "1"},
                               HttpsEnvironment(server, dir + "/ca.pem"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the certificate of " + server.https_endpoint + " is not trusted"));
  EXPECT_THAT(r.err, HasSubstr("AWS_CA_BUNDLE"));
  r = RunProcess({RCKPT_S3_HELPER_PATH, "load", url, "1"},
                 HttpsEnvironment(server, dir + "/ca.pem"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("is not trusted"));
  // Nothing was written: the refusal came before any request was sent.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> plain, NewS3FileSystem(server.Options()));
  EXPECT_FALSE(plain->Exists(url));
}
#endif

// Many requests at once over https, more than the connections: each is
// answered whole, whichever lane took it.
TEST(S3TlsTest, ManyRangedReadsAtOnceOverHttps) {
  RCKPT_REQUIRE_S3_SERVER(server);
  RCKPT_REQUIRE_HTTPS(server);
  const std::string url = server.UniquePrefix() + "ranges.bin";
  std::vector<std::byte> data(6 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<std::byte>((i * 131 + i / 7) & 0xff);
  S3Options o = server.Options(server.https_endpoint);
  o.ca_file = server.ca_bundle;
  o.max_requests = 12;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> fs, NewS3FileSystem(o));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w, fs->OpenForWrite(url));
    ASSERT_OK(w->Append(data));
    ASSERT_OK(w->Close());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f, fs->OpenForRead(url));
  constexpr size_t kReads = 48;
  std::vector<std::vector<std::byte>> got(kReads);
  std::vector<std::thread> readers;
  std::vector<Status> results(kReads);
  for (size_t i = 0; i < kReads; ++i) {
    readers.emplace_back([&, i] {
      const size_t offset = i * (data.size() / kReads) + i;
      got[i].resize(64 << 10);
      results[i] = f->ReadAt(offset, got[i]);
      if (results[i].ok() &&
          !std::equal(got[i].begin(), got[i].end(), data.begin() + static_cast<long>(offset))) {
        results[i] = Status::Corruption("read " + std::to_string(i) + " differs");
      }
    });
  }
  for (std::thread& t : readers) t.join();
  for (const Status& s : results) EXPECT_OK(s);
}

// An endpoint named by a host name, not an address: the transport looks it
// up and gives each lane the addresses in its own order (where localhost
// is ::1 too, the server listening on 127.0.0.1 only, a lane that begins at
// ::1 falls back to 127.0.0.1).
TEST(S3TlsTest, AnEndpointNamedByAHostNameIsReachedFromEveryLane) {
  RCKPT_REQUIRE_S3_SERVER(server);
  const std::string prefix = "http://127.0.0.1:";
  if (server.endpoint.rfind(prefix, 0) != 0) {
    GTEST_SKIP() << "the test server is not at " << prefix << "PORT: " << server.endpoint;
  }
  S3Options o = server.Options("http://localhost:" + server.endpoint.substr(prefix.size()));
  o.max_requests = 16;
  Result<std::unique_ptr<FileSystem>> fs = NewS3FileSystem(o);
  ASSERT_OK(fs.status());
  const std::string url = server.UniquePrefix() + "by-name.bin";
  std::vector<std::byte> data(24 << 20);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<std::byte>((i * 7 + i / 4096) & 0xff);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w, (*fs)->OpenForWrite(url));
    ASSERT_OK(w->Append(data));
    ASSERT_OK(w->Close());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f, (*fs)->OpenForRead(url));
  std::vector<std::byte> back(data.size());
  ASSERT_OK(f->ReadAt(0, back));
  EXPECT_TRUE(back == data);
}

}  // namespace
}  // namespace rckpt
