// Collective saves to object storage against the real server: the ranks
// (threads of this process, tests/distributed/thread_communicator.h) write
// ONE object with one multipart upload, any world size loads it by ranged
// reads, and a failure on any rank, a throttling storm or a rank that never
// comes leaves the previous object and no incomplete upload. Objects are
// about 16 MiB: two ranks' regions padded to one 8 MiB part each.
#include <cstring>
#include <regex>
#include <sstream>

#include "distributed/mpi_state.h"
#include "distributed/thread_communicator.h"
#include "rckpt/distributed.h"
#include "rckpt/inspect.h"
#include "rckpt/s3.h"
#include "s3/json_fields.h"
#include "s3/s3_test_env.h"

namespace rckpt {
namespace {

using namespace std::chrono_literals;
using testing::FaultProxy;
using testing::GlobalTensor;
using testing::GlobalTensors;
using testing::GlobalValue;
using testing::OnRanks;
using testing::PartOf;
using testing::S3TestServer;
using testing::Slice;

// Rank `rank` of `world`'s state at step `step`: every global tensor split
// by rows (or replicated), its RNG record, its own tree.
RankState StateOf(int rank, int world, int step) {
  RankState s;
  for (const GlobalTensor& g : GlobalTensors()) {
    const Tensor global = GlobalValue(g);
    if (g.split_dim < 0) {
      EXPECT_OK(s.local.AddTensor(g.section, g.name, global));
      continue;
    }
    const Block b = PartOf(g.shape, g.split_dim, rank, world);
    s.shards.push_back(ShardPart{
        g.section, g.name, g.shape, b.offsets, Slice(global, b), {}, {}});
  }
  EXPECT_OK(s.local.AddRng("cuda", RngKind::kTorchCuda,
                           testing::RankRngBytes(rank, step)));
  s.local.Tree() = testing::RankTree(rank, step);
  s.common_tree = testing::CommonTree(step);
  return s;
}

std::string Bytes(const Tensor& t) {
  auto b = t.host_bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

int Count(const std::string& stats, const std::string& name) {
  const std::regex re("\"" + name + "\": *([0-9]+)");
  std::smatch m;
  return std::regex_search(stats, m, re) ? std::stoi(m[1]) : 0;
}

class S3DistributedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = S3TestServer::FromEnvironment();
    if (!server_) {
      GTEST_SKIP() << "no S3 test server: RCKPT_TEST_S3_ENDPOINT is not set "
                      "(start one with "
                      "`bash tests/s3/s3_server.sh start DIR` and `set -a; . "
                      "DIR/s3.env`)";
    }
    std::string why;
    proxy_ = FaultProxy::Start(*server_, &why);
    if (proxy_ == nullptr) GTEST_SKIP() << "no fault proxy: " << why;
    Result<std::unique_ptr<FileSystem>> fs =
        NewS3FileSystem(server_->Options(proxy_->endpoint()));
    ASSERT_OK(fs.status());
    fs_ = std::move(*fs);
    url_ = server_->UniquePrefix() + "ck.rckpt";
  }

  // Saves step `step` from `world` ranks; every rank's outcome.
  std::vector<Status> Save(int world, int step, SaveOptions o = {},
                           std::chrono::milliseconds timeout = 60s) {
    o.fs = fs_.get();
    return OnRanks<Status>(
        world,
        [&](Communicator& comm) {
          return SaveDistributed(comm, url_, StateOf(comm.rank(), world, step),
                                 o);
        },
        timeout);
  }

  // The object's bytes, read whole.
  std::string ObjectBytes() {
    Result<std::unique_ptr<RandomAccessFile>> f = fs_->OpenForRead(url_);
    EXPECT_OK(f.status());
    if (!f.ok()) return "";
    std::string out((*f)->Size(), '\0');
    EXPECT_OK((*f)->ReadAt(0, std::as_writable_bytes(std::span<char>(out))));
    return out;
  }

  // What is under the test's prefix: its objects' and incomplete uploads'
  // counts.
  std::pair<size_t, size_t> UnderPrefix() {
    const std::string prefix = url_.substr(0, url_.rfind('/') + 1);
    Result<std::vector<FileInfo>> objects = fs_->List(prefix);
    Result<std::vector<IncompleteWrite>> pending = fs_->ListIncomplete(prefix);
    EXPECT_OK(objects.status());
    EXPECT_OK(pending.status());
    return {objects.ok() ? objects->size() : 0,
            pending.ok() ? pending->size() : 0};
  }

  // Loads every global tensor at `world` ranks, each rank its rows, and
  // checks them and the trees of step `step`.
  void ExpectLoads(int world, int saved_world, int step) {
    LoadOptions o;
    o.fs = fs_.get();
    const auto out = OnRanks<Result<RankLoad>>(world, [&](Communicator& comm) {
      std::vector<BlockRequest> wants;
      for (const GlobalTensor& g : GlobalTensors()) {
        const int dim = g.shape.empty() ? -1 : 0;
        if (dim < 0) {
          wants.push_back({g.name, {}, {}, std::nullopt});
        } else {
          const Block b = PartOf(g.shape, dim, comm.rank(), world);
          wants.push_back({g.name, b.offsets, b.sizes, std::nullopt});
        }
      }
      return LoadDistributed(comm, url_, wants, o);
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_OK(out[r].status());
      const RankLoad& back = *out[r];
      EXPECT_EQ(back.saved_world_size, saved_world);
      EXPECT_EQ(back.common_tree, testing::CommonTree(step));
      ASSERT_EQ(back.rank_trees.size(), static_cast<size_t>(saved_world));
      EXPECT_EQ(back.rank_trees[1], testing::RankTree(1, step));
      // Raw chunks of 4 MiB at most hold these small tensors whole: a rank
      // reads its rows' chunks, never the padding or the other regions.
      EXPECT_LE(back.bytes_read, 3 * back.bytes_needed + (64 << 10))
          << "rank " << r;
      size_t k = 0;
      for (const GlobalTensor& g : GlobalTensors()) {
        const Tensor global = GlobalValue(g);
        const Tensor want = g.shape.empty()
                                ? global
                                : Slice(global, PartOf(g.shape, 0, r, world));
        EXPECT_EQ(Bytes(back.blocks[k++].tensor), Bytes(want))
            << g.name << " at rank " << r;
      }
    }
  }

  std::optional<S3TestServer> server_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<FileSystem> fs_;
  std::string url_;
};

TEST_F(S3DistributedTest, TwoRanksWriteOneObjectThatEveryWorldSizeLoads) {
  for (const Status& s : Save(2, 1)) ASSERT_OK(s);
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
  const std::string stats = *proxy_->Stats();
  EXPECT_EQ(Count(stats, "CreateMultipartUpload"), 1) << stats;
  // A part per rank (each region padded to 8 MiB) and the manifest's.
  EXPECT_EQ(Count(stats, "UploadPart"), 3) << stats;
  EXPECT_EQ(Count(stats, "CompleteMultipartUpload"), 1) << stats;
  VerifyReport report;
  ASSERT_OK(VerifyRckpt(url_, &report, {}, fs_.get()));
  EXPECT_EQ(report.tensors, GlobalTensors().size());
  for (int world : {1, 2, 3})
    ASSERT_NO_FATAL_FAILURE(ExpectLoads(world, 2, 1)) << world;
  // Compressed chunks (spilled locally, then uploaded) replace it whole.
  for (const Status& s : Save(2, 2, {.codec = Codec::kZstd})) ASSERT_OK(s);
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(2, 2, 2));
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

// Ranks of uneven shares (12 and 20 MiB) write one object whose parts but
// the last are one size (R2 and Garage refuse any other): each region
// padded to whole parts, the manifest's part last and no larger. A byte
// damaged on the way in one rank's part is refused by the server (its
// CRC-32C) and the part sent again.
TEST_F(S3DistributedTest, UnevenRanksUploadPartsOfOneSizeAndResendADamagedOne) {
  ASSERT_OK(proxy_->AddRules(
      R"([{"match": {"operation": "UploadPart", "query": "partNumber=3"},
           "action": {"flip_byte": 777}}])"));
  const std::vector<Status> out = OnRanks<Status>(2, [&](Communicator& comm) {
    RankState s = StateOf(comm.rank(), 2, 1);
    const int64_t mib = comm.rank() == 0 ? 12 : 20;
    Tensor own = *Tensor::Empty(DType::kU8, {mib << 20});
    std::memset(own.data(), 0x40 + comm.rank(), own.nbytes());
    EXPECT_OK(s.local.AddTensor("extra", testing::Numbered("own", comm.rank()), own));
    SaveOptions o;
    o.fs = fs_.get();
    return SaveDistributed(comm, url_, s, o);
  });
  for (const Status& s : out) ASSERT_OK(s);
  Result<std::string> json = proxy_->Parts();
  ASSERT_OK(json.status());
  Result<std::map<std::string, std::string>> f = s3::ParseJsonFields(*json);
  ASSERT_OK(f.status());
  std::vector<uint64_t> sizes;
  std::istringstream in((*f)[url_.substr(std::string("s3:/").size())]);
  for (uint64_t n; in >> n;) sizes.push_back(n);
  ASSERT_EQ(sizes.size(), 2u + 3u + 1u) << *json;  // 16 and 24 MiB, the manifest
  for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], 8u << 20) << i;
  EXPECT_LE(sizes.back(), 8u << 20);
  const std::string stats = *proxy_->Stats();
  EXPECT_EQ(Count(stats, "flip"), 1) << stats;
  EXPECT_EQ(Count(stats, "UploadPart"), 7) << stats;
  VerifyReport report;
  ASSERT_OK(VerifyRckpt(url_, &report, {}, fs_.get()));
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(2, 2, 1));
}

TEST_F(S3DistributedTest,
       AFailureOnOneRankAbortsTheUploadAndKeepsThePreviousObject) {
  for (const Status& s : Save(2, 1)) ASSERT_OK(s);
  const std::string before = ObjectBytes();
  // Rank 1 cancels mid-upload (its progress callback), after its parts began.
  const std::vector<Status> out = OnRanks<Status>(2, [&](Communicator& comm) {
    SaveOptions o;
    o.fs = fs_.get();
    o.chunk_bytes = 4096;
    if (comm.rank() == 1)
      o.progress = [](uint64_t done, uint64_t) { return done < 8192; };
    return SaveDistributed(comm, url_, StateOf(comm.rank(), 2, 2), o);
  });
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("rank 1: "), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("cancelled"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(ObjectBytes(), before);
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

TEST_F(S3DistributedTest,
       SlowDownStormsOnEveryRanksPartsAreRetriedOrAbortEverywhere) {
  for (const Status& s : Save(2, 1)) ASSERT_OK(s);
  const std::string before = ObjectBytes();
  // A storm that passes: every rank's parts are refused a few times.
  ASSERT_OK(proxy_->ResetStats());
  ASSERT_OK(proxy_->AddRules(
      R"([{"match": {"operation": "UploadPart", "query": "partNumber=1"},
      "times": 2, "action": {"status": 503, "code": "SlowDown"}},
    {"match": {"operation": "UploadPart", "query": "partNumber=2"},
      "times": 2, "action": {"status": 503, "code": "SlowDown"}}])"));
  for (const Status& s : Save(2, 2)) ASSERT_OK(s);
  EXPECT_EQ(Count(*proxy_->Stats(), "status"), 4) << *proxy_->Stats();
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(2, 2, 2));
  const std::string second = ObjectBytes();
  EXPECT_NE(second, before);
  // A storm that does not: every part refused past the retries, on every
  // rank; every rank fails, nothing of the save remains.
  ASSERT_OK(
      proxy_->AddRules(R"([{"match": {"operation": "UploadPart"}, "times": -1,
      "action": {"status": 503, "code": "SlowDown"}}])"));
  const std::vector<Status> out = Save(2, 3);
  for (const Status& s : out) {
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("UploadPart"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("503"), std::string::npos) << s.ToString();
  }
  ASSERT_OK(proxy_->ClearRules());
  EXPECT_EQ(ObjectBytes(), second);
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

TEST_F(S3DistributedTest,
       ARankThatNeverComesTimesTheOthersOutAndTheyAbortTheUpload) {
  const std::vector<Status> out = OnRanks<Status>(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) return Status::Ok();  // never calls the save
        SaveOptions o;
        o.fs = fs_.get();
        return SaveDistributed(comm, url_, StateOf(0, 2, 1), o);
      },
      2s);
  EXPECT_EQ(out[0].code(), StatusCode::kIoError) << out[0].ToString();
  EXPECT_NE(out[0].message().find("timed out"), std::string::npos)
      << out[0].ToString();
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{0}, size_t{0}));
}

// Where ETags are opaque (the proxy makes HeadObject's so), rank 0's
// CompleteMultipartUpload whose answer was lost, its retries answered 500
// (Ceph RGW's answer for an upload it no longer has), is recognised by the
// marker the upload carries: every rank succeeds, the object is whole.
TEST_F(S3DistributedTest, ALostCompleteAnswerIsRecognisedByTheUploadsMarker) {
  ASSERT_OK(proxy_->AddRules(R"([
    {"match": {"operation": "CompleteMultipartUpload"}, "times": 1,
     "action": {"reset_after_bytes": 0, "direction": "response"}},
    {"match": {"operation": "CompleteMultipartUpload"}, "times": -1,
     "action": {"status": 500}},
    {"match": {"operation": "HeadObject"}, "times": -1, "action": {"etag": "opaque"}}])"));
  for (const Status& s : Save(2, 1)) ASSERT_OK(s);
  const std::string stats = *proxy_->Stats();
  EXPECT_GE(Count(stats, "CompleteMultipartUpload"), 2) << stats;
  EXPECT_EQ(Count(stats, "etag"), 1) << stats;
  ASSERT_OK(proxy_->ClearRules());
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(2, 2, 1));
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

// SaveOptions::replace = false completes the upload with If-None-Match: *:
// over an existing object every rank returns AlreadyExists, the upload is
// aborted and the object stays.
TEST_F(S3DistributedTest, ASaveThatMustNotReplaceFindsTheKeyTakenOnEveryRank) {
  for (const Status& s : Save(2, 1, {.replace = false})) ASSERT_OK(s);
  const std::string before = ObjectBytes();
  for (const Status& s : Save(2, 2, {.replace = false})) {
    EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  }
  EXPECT_EQ(ObjectBytes(), before);
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

// A rank that dies at its collective number `die_at` (counted from 1):
// once `before` returns, the group breaks, as a peer's death breaks a real
// job's.
class DyingCommunicator : public Communicator {
 public:
  DyingCommunicator(testing::ThreadGroup& group, int rank, int die_at,
                    std::function<void()> before)
      : group_(group), inner_(group, rank), die_at_(die_at), before_(std::move(before)) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Result<std::vector<std::string>> AllGather(std::string_view bytes) override {
    if (++calls_ == die_at_) {
      before_();
      group_.Break();
      return Status::IoError("rank " + std::to_string(rank()) + " is gone");
    }
    return inner_.AllGather(bytes);
  }
  Result<std::string> Broadcast(int root, std::string_view bytes) override {
    RCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(bytes));
    return all[root];
  }

 private:
  testing::ThreadGroup& group_;
  testing::ThreadCommunicator inner_;
  const int die_at_;
  const std::function<void()> before_;
  int calls_ = 0;
};

// Rank 2 of 3 dies at the ranks' last agreement, after rank 0 completed the
// upload: the object is the save's, so rank 0 and rank 1 (which finds the
// object carrying the upload's marker) report success, not a failure.
TEST_F(S3DistributedTest, ARankLostAfterTheCompletionDoesNotFailTheSave) {
  // The number of collectives rank 2 makes in a save: the last is the final
  // agreement.
  int collectives = 0;
  const std::string counted = url_ + ".counted";
  OnRanks<Status>(3, [&](Communicator& comm) {
    Status s = SaveDistributed(comm, counted, StateOf(comm.rank(), 3, 1), {.fs = fs_.get()});
    if (comm.rank() == 2) collectives = dynamic_cast<testing::ThreadCommunicator&>(comm).collectives();
    return s;
  });
  ASSERT_GT(collectives, 1);
  ASSERT_OK(fs_->Remove(counted));
  testing::ThreadGroup group(3, 60s);
  std::vector<Status> out(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      const SaveOptions o = {.fs = fs_.get()};
      if (r != 2) {
        testing::ThreadCommunicator comm(group, r);
        out[r] = SaveDistributed(comm, url_, StateOf(r, 3, 1), o);
        return;
      }
      // Rank 2 dies once the object is there (rank 0 completed it).
      DyingCommunicator comm(group, r, collectives, [&] {
        for (int i = 0; i < 600 && !fs_->Exists(url_); ++i) std::this_thread::sleep_for(50ms);
      });
      out[r] = SaveDistributed(comm, url_, StateOf(r, 3, 1), o);
    });
  }
  for (std::thread& t : ranks) t.join();
  // (Rank 2 stands for a dead process: what it returns is nobody's.)
  EXPECT_OK(out[0]);
  EXPECT_OK(out[1]);
  ASSERT_NO_FATAL_FAILURE(ExpectLoads(3, 3, 1));
  EXPECT_EQ(UnderPrefix(), std::make_pair(size_t{1}, size_t{0}));
}

}  // namespace
}  // namespace rckpt
