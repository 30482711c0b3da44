// Concurrent loads of one file agree, and a reader that opened a file keeps
// seeing the bytes it opened while another process saves over the path.
#include <filesystem>
#include <thread>

#include "format/file_reader.h"
#include "format/skeleton.h"
#include "reliability/child_process.h"
#include "reliability/reliability_util.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt::reliability {
namespace {

namespace fs = std::filesystem;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class ConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("concurrency");
    path_ = dir_ + "/ck.rckpt";
    const Checkpoint ck = MakeCheckpoint(7, 16);
    digest_ = Digest(ck);
    SaveOptions o;
    o.chunk_bytes = 256 << 10;  // many chunks: the loads' workers interleave
    ASSERT_OK(Save(path_, ck, o));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  std::string path_;
  uint64_t digest_ = 0;
};

TEST_F(ConcurrencyTest, LoadsFromManyThreadsAreIdentical) {
  constexpr int kThreads = 6;
  std::vector<uint64_t> digests(kThreads);
  std::vector<Status> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      LoadOptions o;
      o.threads = 2;
      Result<Checkpoint> ck = Load(path_, o);
      if (ck.ok()) {
        digests[i] = Digest(*ck);
      } else {
        errors[i] = ck.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_OK(errors[i]);
    EXPECT_EQ(digests[i], digest_) << "thread " << i;
  }
}

TEST_F(ConcurrencyTest, LoadsFromManyProcessesAreIdentical) {
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < 4; ++i) {
    children.push_back(std::make_unique<Child>(
        std::vector<std::string>{RCKPT_RELIABILITY_CHILD, "digest", path_}));
  }
  for (auto& c : children) {
    const int status = c->Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << c->output();
    EXPECT_EQ(c->output(), Hex(digest_) + "\n");
  }
}

TEST_F(ConcurrencyTest, ReaderKeepsItsFileWhileAnotherProcessSavesOverThePath) {
  ASSERT_OK_AND_ASSIGN(auto reader, FileReader::Open(PosixFileSystem(), path_));
  // Another process replaces the file completely, then one is killed mid-save.
  ASSERT_EQ(RunChild({RCKPT_RELIABILITY_CHILD, "save", path_, "8", "16", "-1"}), "OK\t");
  int status = 0;
  RunChild({RCKPT_RELIABILITY_CHILD, "save", path_, "9", "16", std::to_string(8 << 20)}, &status);
  ASSERT_TRUE(WIFSIGNALED(status));

  EXPECT_OK(reader->VerifyAll());
  ASSERT_OK_AND_ASSIGN(Checkpoint seen, CheckpointSkeleton(reader->manifest()));
  for (const TensorMeta& t : reader->manifest().tensors) {
    ASSERT_OK_AND_ASSIGN(Tensor tensor, Tensor::Zeros(t.dtype, t.shape));
    ASSERT_OK(reader->ReadTensorToHost(t, tensor.mutable_host_bytes(), true));
    ASSERT_OK(seen.AddTensor(t.section, t.name, std::move(tensor), t.role));
  }
  EXPECT_EQ(Digest(seen), digest_);
  // A new open sees the replacement.
  ASSERT_OK_AND_ASSIGN(Checkpoint now, Load(path_));
  EXPECT_EQ(Digest(now), Digest(MakeCheckpoint(8, 16)));
}

}  // namespace
}  // namespace rckpt::reliability
