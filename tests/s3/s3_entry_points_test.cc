// s3:// through the conversion entry points (PyTorch .pt and .safetensors
// objects, read by ranged GETs) and the CLI, which reaches S3 through the
// AWS environment as the AWS CLI does.
#include <cstring>
#include <filesystem>

#include "rckpt/convert.h"
#include "rckpt/io.h"
#include "rckpt/s3.h"
#include "s3/s3_test_env.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::RunProcess;
using testing::S3TestServer;

Checkpoint Floats(float base) {
  Checkpoint ck;
  for (int i = 0; i < 3; ++i) {
    Tensor t = *Tensor::Empty(DType::kF32, {300, 1000});
    auto* p = static_cast<float*>(t.data());
    for (int k = 0; k < 300000; ++k) p[k] = base + 0.25f * static_cast<float>(k % 977) + i;
    EXPECT_OK(ck.AddTensor("model", "layer" + std::to_string(i) + ".weight", std::move(t)));
  }
  return ck;
}

void ExpectSame(const Checkpoint& a, const Checkpoint& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const TensorEntry& t : a.tensors()) {
    const TensorEntry* u = b.FindTensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(t.tensor.nbytes(), u->tensor.nbytes());
    EXPECT_EQ(std::memcmp(t.tensor.data(), u->tensor.data(), t.tensor.nbytes()), 0) << t.name;
  }
}

class S3EntryPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = S3TestServer::FromEnvironment();
    if (!server_) {
      GTEST_SKIP() << "no S3 test server: RCKPT_TEST_S3_ENDPOINT is not set (start one with "
                      "`bash tests/s3/s3_server.sh start DIR` and `set -a; . DIR/s3.env`)";
    }
    Result<std::unique_ptr<FileSystem>> fs = NewS3FileSystem(server_->Options());
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    fs_ = std::move(*fs);
    prefix_ = server_->UniquePrefix();
  }

  std::optional<S3TestServer> server_;
  std::unique_ptr<FileSystem> fs_;
  std::string prefix_;
};

TEST_F(S3EntryPointTest, PyTorchAndSafetensorsObjectsBothWays) {
  const Checkpoint ck = Floats(1);
  ExportOptions eo;
  eo.fs = fs_.get();
  ImportOptions io;
  io.fs = fs_.get();
  for (const std::string name : {"model.pt", "model.safetensors", "model.rckpt"}) {
    SCOPED_TRACE(name);
    ASSERT_OK(WriteAnyCheckpoint(ck, prefix_ + name, eo, {.fs = fs_.get()}));
    ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadAnyCheckpoint(prefix_ + name, io));
    ExpectSame(ck, back);
    ASSERT_OK_AND_ASSIGN(CheckpointFormat f, DetectFormat(prefix_ + name, fs_.get()));
    EXPECT_NE(f, CheckpointFormat::kUnknown);
  }
  // The same file system serves local paths: a conversion between the two.
  const std::string local = testing::NewTempDir("s3-convert") + "/local.safetensors";
  ASSERT_OK_AND_ASSIGN(Checkpoint from_s3, ReadAnyCheckpoint(prefix_ + "model.pt", io));
  ASSERT_OK(WriteAnyCheckpoint(from_s3, local, eo, {.fs = fs_.get()}));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadAnyCheckpoint(local, io));
  ExpectSame(ck, back);
}

TEST_F(S3EntryPointTest, ADcpCheckpointUnderAPrefixConverts) {
  const std::string local = std::string(RCKPT_TEST_DATA_DIR) + "/dcp/simple";
  const std::string remote = prefix_ + "dcp-step-100";
  for (const auto& entry : std::filesystem::directory_iterator(local)) {
    const std::string bytes = testing::ReadAll(entry.path().string());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w,
                         fs_->OpenForWrite(remote + "/" + entry.path().filename().string()));
    ASSERT_OK(w->Append(std::as_bytes(std::span<const char>(bytes.data(), bytes.size()))));
    ASSERT_OK(w->Close());
  }
  ImportOptions io;
  io.fs = fs_.get();
  io.scratch_dir = testing::NewTempDir("dcp-scratch");
  ASSERT_OK_AND_ASSIGN(CheckpointFormat f, DetectFormat(remote, fs_.get()));
  EXPECT_EQ(f, CheckpointFormat::kDcp);
  ASSERT_OK_AND_ASSIGN(Checkpoint from_s3, ReadAnyCheckpoint(remote, io));
  ASSERT_OK_AND_ASSIGN(Checkpoint from_disk, ReadAnyCheckpoint(local));
  EXPECT_FALSE(from_disk.tensors().empty());
  ExpectSame(from_disk, from_s3);
}

#ifdef RCKPT_CLI_PATH
ProcessResult Cli(const S3TestServer& s, std::vector<std::string> args) {
  args.insert(args.begin(), RCKPT_CLI_PATH);
  return RunProcess(args, s.AwsEnvironment());
}

TEST_F(S3EntryPointTest, EveryCliCommandTakesS3Urls) {
  const std::string dir = testing::NewTempDir("s3-cli");
  ASSERT_OK(Save(dir + "/a.rckpt", Floats(1)));
  ASSERT_OK(Save(dir + "/b.rckpt", Floats(2)));
  const std::string a = prefix_ + "a.rckpt", b = prefix_ + "b.rckpt";
  ProcessResult r = Cli(*server_, {"convert", dir + "/a.rckpt", a});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"convert", dir + "/b.rckpt", b});
  ASSERT_EQ(r.status, 0) << r.err;

  r = Cli(*server_, {"inspect", a});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("layer2.weight"));
  r = Cli(*server_, {"inspect", a, "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"schema_version\""));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr(server_->secret_key)));
  r = Cli(*server_, {"verify", a});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("every checksum matches"));
  r = Cli(*server_, {"plan", a});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"load", a});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"diff", a, a});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"diff", a, b});
  EXPECT_EQ(r.status, 1) << r.err;
  r = Cli(*server_, {"diff", a, dir + "/a.rckpt"});
  EXPECT_EQ(r.status, 0) << r.err;
  // Either side of convert, any format.
  r = Cli(*server_, {"convert", a, prefix_ + "a.safetensors"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"convert", prefix_ + "a.safetensors", dir + "/back.pt"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Cli(*server_, {"diff", dir + "/back.pt", a});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

// The proxy variables, as curl reads them: requests go through
// http_proxy (the fault proxy relays absolute-form requests), except to
// hosts NO_PROXY names.
TEST_F(S3EntryPointTest, TheProxyVariablesAreHonoured) {
  RCKPT_REQUIRE_FAULT_PROXY(proxy, *server_);
  const std::string url = prefix_ + "proxied.rckpt";
  ASSERT_OK(Save(url, Floats(3), {.fs = fs_.get()}));
  std::vector<std::string> env = server_->AwsEnvironment();
  env.push_back("http_proxy=" + proxy->endpoint());
  env.push_back("no_proxy=");
  env.push_back("NO_PROXY=");
  ProcessResult r = RunProcess({RCKPT_CLI_PATH, "verify", url}, env);
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(std::string stats, proxy->Stats());
  EXPECT_THAT(stats, HasSubstr("\"GetObject\""));
  ASSERT_OK(proxy->ResetStats());
  env[env.size() - 2] = "no_proxy=127.0.0.1";
  env.back() = "NO_PROXY=127.0.0.1";
  r = RunProcess({RCKPT_CLI_PATH, "verify", url}, env);
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(stats, proxy->Stats());
  EXPECT_THAT(stats, ::testing::Not(HasSubstr("\"GetObject\"")));
}

// An endpoint URL's "user:password@" is refused and never shown; an
// object-storage URL's scheme is "s3://" in lower case, and "S3://" is
// refused rather than taken for a local folder "S3:".
TEST_F(S3EntryPointTest, TheCliNeverShowsAnEndpointsPasswordNorTakesS3InCapitals) {
  const std::string at = server_->endpoint.substr(server_->endpoint.find("://") + 3);
  ProcessResult r = RunProcess({RCKPT_CLI_PATH, "inspect", prefix_ + "x.rckpt"},
                               server_->AwsEnvironment("http://KEYUSER:PwSeCrEt@" + at));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("AWS_ENDPOINT_URL 'http://***@" + at + "'"));
  EXPECT_THAT(r.out + r.err, ::testing::Not(HasSubstr("PwSeCrEt")));
  EXPECT_THAT(r.out + r.err, ::testing::Not(HasSubstr("KEYUSER")));
  const std::string dir = testing::NewTempDir("s3-case");
  ASSERT_OK(Save(dir + "/a.rckpt", Floats(1)));
  const std::string upper = "S3://" + prefix_.substr(5) + "a.rckpt";
  r = Cli(*server_, {"convert", dir + "/a.rckpt", upper});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("an object-storage URL begins with s3:// in lower case"));
  r = Cli(*server_, {"inspect", upper});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("in lower case"));
}

TEST_F(S3EntryPointTest, CliErrorsHaveTheirOwnExitCodes) {
  ProcessResult r = Cli(*server_, {"inspect", prefix_ + "missing.rckpt"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("'" + prefix_ + "missing.rckpt' does not exist"));
  r = Cli(*server_, {"verify", "s3://rckpt-no-such-bucket/x.rckpt"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bucket 'rckpt-no-such-bucket' does not exist"));
  for (const char* url : {"s3://", "s3://bucket", "s3://bucket/"}) {
    r = Cli(*server_, {"inspect", url});
    EXPECT_EQ(r.status, 2) << url << r.err;
    EXPECT_THAT(r.err, HasSubstr("expected s3://BUCKET/KEY")) << url;
  }
  std::vector<std::string> env = server_->AwsEnvironment();
  for (std::string& e : env) {
    if (e.starts_with("AWS_SECRET_ACCESS_KEY=")) e = "AWS_SECRET_ACCESS_KEY=wrong-secret-PLUGH";
  }
  r = RunProcess({RCKPT_CLI_PATH, "inspect", prefix_ + "x.rckpt"}, env);
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_THAT(r.err, HasSubstr("refused the signature"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("PLUGH")));
  env = server_->AwsEnvironment("http://127.0.0.1:1");
  r = RunProcess({RCKPT_CLI_PATH, "inspect", prefix_ + "x.rckpt"}, env);
  EXPECT_EQ(r.status, 7) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot connect to http://127.0.0.1:1"));
  r = Cli(*server_, {"incomplete", prefix_, "--older-than", "1h"});
  EXPECT_EQ(r.status, 2) << r.err;
  r = Cli(*server_, {"incomplete", prefix_, "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"incomplete\":[]"));
}
#endif

}  // namespace
}  // namespace rckpt
