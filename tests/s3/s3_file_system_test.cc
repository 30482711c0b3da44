// Checkpoints in S3, against a real server (SeaweedFS, tests/s3/s3_server.sh):
// every load and save entry point, atomic replacement, incomplete uploads,
// ranged reads with If-Match, listings, awkward keys and bad input.
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "rckpt/rng.h"
#include "rckpt/s3.h"
#include "io/url_file_system.h"
#include "s3/client.h"
#include "s3/s3_test_env.h"
#include "s3/s3_writer.h"

namespace rckpt {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::S3TestServer;

// Tensor `i` of a test state: `bytes` bytes of a pattern of `seed`.
Tensor Pattern(uint64_t bytes, uint64_t seed, int i) {
  Tensor t = *Tensor::Empty(DType::kU8, {static_cast<int64_t>(bytes)});
  auto* p = static_cast<uint8_t*>(t.data());
  uint64_t x = seed * 1000003 + static_cast<uint64_t>(i) * 7919 + 1;
  for (uint64_t k = 0; k < bytes; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[k] = static_cast<uint8_t>(x >> 56);
  }
  return t;
}

// `n` tensors of `bytes` each in "model", one float tensor in "optimizer",
// an RNG record and a tree.
Checkpoint State(int n, uint64_t bytes, uint64_t seed) {
  Checkpoint ck;
  for (int i = 0; i < n; ++i) {
    EXPECT_OK(ck.AddTensor("model", testing::Numbered("w", i),
                           Pattern(bytes, seed, i)));
  }
  Tensor f = *Tensor::Empty(DType::kF32, {1000});
  for (int k = 0; k < 1000; ++k) static_cast<float*>(f.data())[k] = 0.5f * k + seed;
  EXPECT_OK(ck.AddTensor("optimizer", "m", std::move(f)));
  std::mt19937_64 engine(seed);
  EXPECT_OK(ck.AddRng("shuffle", RngKind::kMt19937_64, CaptureEngine(engine)));
  ck.Tree()["controller"]["epoch"] = static_cast<int64_t>(seed);
  return ck;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

void ExpectSameTensors(const Checkpoint& want, const Checkpoint& got) {
  ASSERT_EQ(want.tensors().size(), got.tensors().size());
  for (const TensorEntry& t : want.tensors()) {
    const TensorEntry* g = got.FindTensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_TRUE(SameBytes(t.tensor, g->tensor)) << t.name;
  }
}

class S3Test : public ::testing::Test {
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
  SaveOptions Save(SaveOptions o = {}) {
    o.fs = fs_.get();
    return o;
  }
  LoadOptions Load(LoadOptions o = {}) {
    o.fs = fs_.get();
    return o;
  }

  std::optional<S3TestServer> server_;
  std::unique_ptr<FileSystem> fs_;
  std::string prefix_;
};

TEST_F(S3Test, EveryEntryPointReadsWhatSaveWrote) {
  const Checkpoint ck = State(6, 3 << 20, 1);  // 18 MiB: a multipart upload of 3 parts
  const std::string url = prefix_ + "all.rckpt";
  ASSERT_OK(rckpt::Save(url, ck, Save()));

  ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(url, Load()));
  ExpectSameTensors(ck, back);
  EXPECT_EQ(back.rng().size(), 1u);
  EXPECT_EQ(back.Tree()["controller"]["epoch"].as_int(), 1);

  std::vector<uint8_t> dst(3 << 20);
  ASSERT_OK(LoadInto(url, {LoadTarget{"w4", dst.data(), DType::kU8, {3 << 20}, Device::Cpu()}},
                     Load(), /*strict=*/false));
  EXPECT_EQ(std::memcmp(dst.data(), ck.FindTensor("w4")->tensor.data(), dst.size()), 0);

  LoadStats stats;
  LoadOptions one = Load();
  one.stats = &stats;
  ASSERT_OK_AND_ASSIGN(std::vector<TensorEntry> read, ReadTensors(url, {"w2"}, one));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(SameBytes(read[0].tensor, ck.FindTensor("w2")->tensor));
  // A partial load fetches only what it needs: one tensor and the framing.
  EXPECT_LT(stats.bytes_read, (3u << 20) + (1u << 20));

  ASSERT_OK_AND_ASSIGN(std::vector<Placement> plan, PlanLoad(url, Load(), 0));
  EXPECT_EQ(plan.size(), 8u);  // 7 tensors, 1 RNG record
  ASSERT_OK_AND_ASSIGN(InspectReport report, InspectRckpt(url, fs_.get()));
  EXPECT_EQ(report.tensors.size(), 7u);
  VerifyReport verified;
  ASSERT_OK(VerifyRckpt(url, &verified, {}, fs_.get()));
  EXPECT_EQ(verified.tensors, 7u);
}

TEST_F(S3Test, CompressedAndSmallObjectsRoundTrip) {
  const Checkpoint ck = State(3, 100000, 2);  // smaller than a part: one PutObject
  ASSERT_OK(rckpt::Save(prefix_ + "small.rckpt", ck, Save({.codec = Codec::kZstd})));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(prefix_ + "small.rckpt", Load()));
  ExpectSameTensors(ck, back);
  const Checkpoint empty;
  ASSERT_OK(rckpt::Save(prefix_ + "empty.rckpt", empty, Save()));
  ASSERT_OK_AND_ASSIGN(Checkpoint none, rckpt::Load(prefix_ + "empty.rckpt", Load()));
  EXPECT_TRUE(none.tensors().empty());
}

TEST_F(S3Test, KeysWithSpacesUnicodeEqualsAndPlusSurvive) {
  const Checkpoint ck = State(1, 5000, 3);
  for (const std::string key :
       {"a b+c=d/\xc3\xbc.rckpt", "100%25 sure.rckpt", "semi;colon,&amp.rckpt", "q?mark#hash.rckpt",
        "\xe6\x97\xa5\xe6\x9c\xac/~tilde.rckpt"}) {
    SCOPED_TRACE(key);
    ASSERT_OK(rckpt::Save(prefix_ + key, ck, Save()));
    ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(prefix_ + key, Load()));
    ExpectSameTensors(ck, back);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> listed, fs_->List(prefix_));
  std::vector<std::string> paths;
  for (const FileInfo& f : listed) paths.push_back(f.path);
  EXPECT_THAT(paths, ::testing::Contains(prefix_ + "a b+c=d/\xc3\xbc.rckpt"));
  EXPECT_THAT(paths, ::testing::Contains(prefix_ + "q?mark#hash.rckpt"));
  EXPECT_EQ(paths.size(), 5u);
}

// While a save runs, readers see the previous object and the save is an
// incomplete upload; the new object appears whole when it completes.
TEST_F(S3Test, TheObjectIsReplacedOnlyWhenTheUploadCompletes) {
  const std::string url = prefix_ + "replace.rckpt";
  const Checkpoint old_state = State(2, 1 << 20, 10);
  ASSERT_OK(rckpt::Save(url, old_state, Save()));
  const Checkpoint new_state = State(8, 4 << 20, 11);  // 32 MiB
  bool checked = false;
  SaveOptions o = Save();
  o.progress = [&](uint64_t done, uint64_t total) {
    if (checked || done < total / 2) return true;
    checked = true;
    Result<Checkpoint> seen = rckpt::Load(url, Load());
    EXPECT_TRUE(seen.ok()) << seen.status().ToString();
    if (seen.ok()) {
      ExpectSameTensors(old_state, *seen);
    }
    Result<std::vector<IncompleteWrite>> open = fs_->ListIncomplete(prefix_);
    EXPECT_TRUE(open.ok());
    if (open.ok()) {
      EXPECT_EQ(open->size(), 1u);
      if (!open->empty()) {
        EXPECT_EQ((*open)[0].path, url);
      }
    }
    return true;
  };
  ASSERT_OK(rckpt::Save(url, new_state, o));
  EXPECT_TRUE(checked);
  ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(url, Load()));
  ExpectSameTensors(new_state, back);
  ASSERT_OK_AND_ASSIGN(std::vector<IncompleteWrite> left, fs_->ListIncomplete(prefix_));
  EXPECT_TRUE(left.empty());
}

TEST_F(S3Test, ACancelledSaveAbortsItsUploadAndKeepsThePreviousObject) {
  const std::string url = prefix_ + "cancel.rckpt";
  const Checkpoint old_state = State(1, 1 << 20, 20);
  ASSERT_OK(rckpt::Save(url, old_state, Save()));
  SaveOptions o = Save();
  o.progress = [](uint64_t done, uint64_t total) { return done < total * 3 / 4; };
  EXPECT_THAT(rckpt::Save(url, State(8, 4 << 20, 21), o),
              StatusIs(StatusCode::kIoError, "cancelled"));
  ASSERT_OK_AND_ASSIGN(std::vector<IncompleteWrite> left, fs_->ListIncomplete(prefix_));
  EXPECT_TRUE(left.empty());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(url, Load()));
  ExpectSameTensors(old_state, back);
}

// A file system that replaces the object right after opening it, as
// another process's save could at any moment of a load.
class ReplacingFileSystem : public FileSystem {
 public:
  ReplacingFileSystem(FileSystem& s3, std::function<void()> replace)
      : s3_(s3), replace_(std::move(replace)) {}
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    Result<std::unique_ptr<RandomAccessFile>> f = s3_.OpenForRead(path);
    replace_();
    return f;
  }
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& p) override {
    return s3_.OpenForWrite(p);
  }
  Status Rename(const std::string& a, const std::string& b) override { return s3_.Rename(a, b); }
  Status Remove(const std::string& p) override { return s3_.Remove(p); }
  Status SyncParentDir(const std::string& p) override { return s3_.SyncParentDir(p); }
  Result<std::vector<std::string>> ListDir(const std::string& d) override { return s3_.ListDir(d); }
  bool Exists(const std::string& p) override { return s3_.Exists(p); }

 private:
  FileSystem& s3_;
  std::function<void()> replace_;
};

TEST_F(S3Test, AnObjectReplacedDuringALoadIsAnErrorNeverAMix) {
  const std::string url = prefix_ + "moving.rckpt";
  ASSERT_OK(rckpt::Save(url, State(4, 4 << 20, 30), Save()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> opened, fs_->OpenForRead(url));
  ReplacingFileSystem replacing(
      *fs_, [&] { EXPECT_OK(rckpt::Save(url, State(4, 4 << 20, 31), Save())); });
  // The footer and manifest came with the first answer; every chunk read
  // after the replacement carries that answer's ETag in If-Match.
  EXPECT_THAT(rckpt::Load(url, {.fs = &replacing}),
              StatusIs(StatusCode::kIoError, "'" + url + "' was replaced while it was being read"));
  std::vector<std::byte> head(64);
  EXPECT_THAT(opened->ReadAt(0, head),
              StatusIs(StatusCode::kIoError, "HTTP 412 PreconditionFailed"));
}

TEST_F(S3Test, ListListDirExistsAndRemove) {
  const Checkpoint ck = State(1, 1000, 40);
  for (const char* key : {"run/a.rckpt", "run/b.rckpt", "run/sub/c.rckpt", "runner.rckpt"}) {
    ASSERT_OK(rckpt::Save(prefix_ + key, ck, Save()));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> all, fs_->List(prefix_ + "run"));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].path, prefix_ + "run/a.rckpt");
  EXPECT_GT(all[0].size, 0u);
  EXPECT_GT(all[0].modified_unix_ms, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> dir, fs_->List(prefix_ + "run/"));
  EXPECT_EQ(dir.size(), 3u);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fs_->ListDir(prefix_ + "run"));
  EXPECT_THAT(names, ::testing::ElementsAre("a.rckpt", "b.rckpt", "sub"));
  EXPECT_TRUE(fs_->Exists(prefix_ + "run/a.rckpt"));
  EXPECT_TRUE(fs_->Exists(prefix_ + "run"));  // a prefix of objects
  EXPECT_FALSE(fs_->Exists(prefix_ + "nothing"));
  ASSERT_OK(fs_->Remove(prefix_ + "run/a.rckpt"));
  EXPECT_FALSE(fs_->Exists(prefix_ + "run/a.rckpt"));
  EXPECT_THAT(fs_->ListDir(prefix_ + "nothing"), StatusIs(StatusCode::kNotFound, "no object"));
  EXPECT_THAT(rckpt::Load(prefix_ + "run", Load()),
              StatusIs(StatusCode::kInvalidArgument, "found a prefix of other objects"));
}

TEST_F(S3Test, MalformedUrlsAreRefusedWithTheExpectedForm) {
  for (const std::string url : {"s3://", "s3://bucket", "s3://bucket/"}) {
    SCOPED_TRACE(url);
    EXPECT_THAT(rckpt::Save(url, State(1, 10, 1), Save()),
                StatusIs(StatusCode::kInvalidArgument, "expected s3://BUCKET/KEY"));
    EXPECT_THAT(rckpt::Load(url, Load()),
                StatusIs(StatusCode::kInvalidArgument, "expected s3://BUCKET/KEY"));
  }
}

TEST_F(S3Test, AMissingKeyOrBucketIsNotFoundNamingIt) {
  EXPECT_THAT(rckpt::Load(prefix_ + "absent.rckpt", Load()),
              StatusIs(StatusCode::kNotFound, "'" + prefix_ + "absent.rckpt' does not exist"));
  // (SeaweedFS makes a bucket a PutObject names; AWS answers NoSuchBucket.)
  const std::string bucket = "rckpt-absent-" + std::to_string(::getpid());
  EXPECT_THAT(rckpt::Load("s3://" + bucket + "/k.rckpt", Load()),
              StatusIs(StatusCode::kNotFound, "bucket '" + bucket + "' does not exist"));
}

TEST_F(S3Test, AWrongSecretOrKeyIsRefusedWithoutShowingTheSecret) {
  S3Options o = server_->Options();
  o.credentials->secret_access_key = "not-the-secret-XYZZY";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> wrong, NewS3FileSystem(o));
  Result<Checkpoint> got = rckpt::Load(prefix_ + "x.rckpt", {.fs = wrong.get()});
  EXPECT_THAT(got, StatusIs(StatusCode::kIoError, "the server refused the signature"));
  EXPECT_THAT(got.status().message(), HasSubstr("access key id " + server_->access_key));
  EXPECT_THAT(got.status().message(), Not(HasSubstr("XYZZY")));
  o.credentials = S3Credentials{"UNKNOWNKEYID", "whatever-secret", "session-token-QWERTY"};
  ASSERT_OK_AND_ASSIGN(wrong, NewS3FileSystem(o));
  got = rckpt::Load(prefix_ + "x.rckpt", {.fs = wrong.get()});
  EXPECT_EQ(got.status().code(), StatusCode::kIoError) << got.status().ToString();
  EXPECT_THAT(got.status().message(), HasSubstr("UNKNOWNKEYID"));
  EXPECT_THAT(got.status().message(), Not(HasSubstr("whatever-secret")));
  EXPECT_THAT(got.status().message(), Not(HasSubstr("QWERTY")));
}

TEST_F(S3Test, ARefusedConnectionFailsFast) {
  S3Options o = server_->Options("http://127.0.0.1:1");
  o.max_attempts = 10;
  o.retry_base_delay_ms = 200;
  o.retry_max_delay_ms = 5000;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> nowhere, NewS3FileSystem(o));
  // An endpoint that never answered is a wrong one, not a restarting
  // server: two tries, not ten (well under a second of backoff).
  EXPECT_THAT(rckpt::Load("s3://b/k.rckpt", {.fs = nowhere.get()}),
              StatusIs(StatusCode::kIoError, "cannot connect to http://127.0.0.1:1"));
  EXPECT_THAT(rckpt::Load("s3://b/k.rckpt", {.fs = nowhere.get()}),
              StatusIs(StatusCode::kIoError, ", after 2 tries"));
}

TEST_F(S3Test, EncryptionAskedForIsSentOnEveryWrite) {
  EXPECT_TRUE(s3::EncryptionHeaders(S3Options{}).empty());
  S3Options o = server_->Options();
  o.encryption = S3Encryption::kS3;
  EXPECT_EQ(s3::EncryptionHeaders(o),
            (s3::KeyValues{{"x-amz-server-side-encryption", "AES256"}}));
  o.encryption = S3Encryption::kKms;
  o.kms_key_id = "arn:aws:kms:us-east-1:111122223333:key/k";
  EXPECT_EQ(s3::EncryptionHeaders(o),
            (s3::KeyValues{{"x-amz-server-side-encryption", "aws:kms"},
                           {"x-amz-server-side-encryption-aws-kms-key-id", o.kms_key_id}}));
  o.encryption = S3Encryption::kBucketDefault;
  EXPECT_THAT(NewS3FileSystem(o),
              StatusIs(StatusCode::kInvalidArgument, "kms_key_id is set but encryption is not"));
  // The test server has no key for SSE-S3 and refuses such writes: the
  // header reached it, for one PutObject and for a multipart upload.
  const std::string url = prefix_ + "sse.rckpt";
  ASSERT_OK(rckpt::Save(url, State(1, 1000, 60), Save()));
  o.encryption = S3Encryption::kS3;
  o.kms_key_id.clear();
  o.max_attempts = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<FileSystem> sse, NewS3FileSystem(o));
  Status small = rckpt::Save(url, State(1, 1000, 61), {.fs = sse.get()});
  Status large = rckpt::Save(url, State(3, 4 << 20, 62), {.fs = sse.get()});
  if (small.ok() && large.ok()) {
    ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(url, Load()));
    ExpectSameTensors(State(3, 4 << 20, 62), back);
  } else {
    EXPECT_THAT(small, StatusIs(StatusCode::kIoError, "PutObject '" + url + "'"));
    EXPECT_THAT(large, StatusIs(StatusCode::kIoError, "CreateMultipartUpload '" + url + "'"));
    ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(url, Load()));
    ExpectSameTensors(State(1, 1000, 60), back);
  }
}

// Every object is application/octet-stream, made by one PutObject or by a
// multipart upload (whose CreateMultipartUpload's type the object keeps:
// never the XML of the requests' bodies).
TEST_F(S3Test, EveryObjectIsApplicationOctetStream) {
  static const s3::MapEnvironment kNoEnvironment;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<s3::S3Client> client,
                       s3::S3Client::Create(server_->Options(), kNoEnvironment));
  const std::string small = prefix_ + "small.rckpt", large = prefix_ + "large.rckpt";
  ASSERT_OK(rckpt::Save(small, State(1, 1000, 70), Save()));
  ASSERT_OK(rckpt::Save(large, State(3, 4 << 20, 71), Save()));
  for (const std::string& url : {small, large}) {
    ASSERT_OK_AND_ASSIGN(s3::S3Url u, s3::ParseS3Url(url));
    s3::S3Call head;
    head.op = "HeadObject";
    head.method = "HEAD";
    head.bucket = u.bucket;
    head.key = u.key;
    ASSERT_OK_AND_ASSIGN(s3::HttpResponse r, client->Execute(head));
    const std::string* type = r.Header("content-type");
    ASSERT_NE(type, nullptr) << url;
    EXPECT_EQ(*type, "application/octet-stream") << url;
  }
}

TEST_F(S3Test, IncompleteUploadsAreListedAndAborted) {
  // An upload begun and left, as a killed save leaves it.
  const std::string url = prefix_ + "left.rckpt";
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<AtomicWritableFile> w,
                         fs_->OpenForAtomicWrite(url, 64 << 20));
    std::vector<std::byte> part(9 << 20, std::byte{7});
    ASSERT_OK(w->Append(part));
    ASSERT_OK(w->Sync());
    ASSERT_OK_AND_ASSIGN(std::vector<IncompleteWrite> open, fs_->ListIncomplete(prefix_));
    ASSERT_EQ(open.size(), 1u);
    EXPECT_EQ(open[0].path, url);
    EXPECT_FALSE(open[0].id.empty());
    EXPECT_GT(open[0].started_unix_ms, 0);
    EXPECT_THAT(rckpt::Load(url, Load()), StatusIs(StatusCode::kNotFound, "does not exist"));
    ASSERT_OK(fs_->AbortIncomplete(open[0]));
    EXPECT_THAT(w->Commit(), StatusIs(StatusCode::kNotFound, "no longer exists"));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<IncompleteWrite> left, fs_->ListIncomplete(prefix_));
  EXPECT_TRUE(left.empty());
}

// A process forked after using S3 (a data loader's workers) has no copy of
// the transport's thread: an explicit file system says so, the default one
// (a router that makes its S3 side from a factory) makes a new one.
TEST_F(S3Test, AForkedChildMakesItsOwnTransport) {
  const std::string url = prefix_ + "fork.rckpt";
  const Checkpoint ck = State(1, 1000, 70);
  ASSERT_OK(rckpt::Save(url, ck, Save()));
  const S3Options options = server_->Options();
  UrlFileSystem routed(PosixFileSystem(), [&] { return NewS3FileSystem(options); });
  ASSERT_OK(rckpt::Load(url, {.fs = &routed}).status());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const Status explicit_fs = rckpt::Load(url, Load()).status();
    const Status remade = rckpt::Load(url, {.fs = &routed}).status();
    const bool refused =
        explicit_fs.message().find("made in another process (before a fork)") != std::string::npos;
    ::_exit((refused ? 0 : 1) + (remade.ok() ? 0 : 2));
  }
  ASSERT_GT(pid, 0);
  EXPECT_EQ(testing::WaitExit(pid), 0);
  ASSERT_OK(rckpt::Load(url, Load()).status());  // the parent's still works
}

TEST_F(S3Test, DefaultFileSystemReadsTheAwsEnvironment) {
  // DefaultFileSystem() is set up once per process from AWS_* variables;
  // this test binary runs it only when they point at the test server.
  const char* endpoint = std::getenv("AWS_ENDPOINT_URL");
  if (endpoint == nullptr || server_->endpoint != endpoint) {
    GTEST_SKIP() << "AWS_ENDPOINT_URL does not name the test server (the CLI tests cover "
                    "the environment)";
  }
  const Checkpoint ck = State(1, 1000, 50);
  ASSERT_OK(rckpt::Save(prefix_ + "env.rckpt", ck));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, rckpt::Load(prefix_ + "env.rckpt"));
  ExpectSameTensors(ck, back);
}

}  // namespace
}  // namespace rckpt
