// Writes that lose nothing: a save killed with SIGKILL at any point, or
// stopped by a full disk, leaves the previous checkpoint at its path loadable
// and verifiable, and at most one stray temporary that the next save removes.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <filesystem>
#include <thread>

#include "format/file_reader.h"
#include "reliability/child_process.h"
#include "reliability/reliability_util.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt::reliability {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kOldSeed = 1;
constexpr uint64_t kOldMib = 2;
constexpr uint64_t kNewSeed = 2;
constexpr uint64_t kNewMib = 64;

// Names in `dir` other than `keep`.
std::vector<std::string> Strays(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() != keep) out.push_back(e.path().filename());
  }
  return out;
}

// The file at `path` passes every check and holds one of `digests`.
void ExpectSoundCheckpoint(const std::string& path, const std::vector<uint64_t>& digests,
                           const std::string& when) {
  Result<std::unique_ptr<FileReader>> reader = FileReader::Open(PosixFileSystem(), path);
  ASSERT_TRUE(reader.ok()) << when << ": " << reader.status().ToString();
  EXPECT_OK((*reader)->VerifyAll());
  Result<Checkpoint> ck = Load(path);
  ASSERT_TRUE(ck.ok()) << when << ": " << ck.status().ToString();
  EXPECT_THAT(digests, ::testing::Contains(Digest(*ck))) << when;
}

class CrashSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("crash-save");
    path_ = dir_ + "/ck.rckpt";
    const Checkpoint old_ck = MakeCheckpoint(kOldSeed, kOldMib);
    old_digest_ = Digest(old_ck);
    ASSERT_OK(Save(path_, old_ck));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // At most one leftover, and it is a temporary of this path.
  void ExpectAtMostOneTemporary(const std::string& when) {
    auto strays = Strays(dir_, "ck.rckpt");
    EXPECT_LE(strays.size(), 1u) << when;
    for (const auto& s : strays) EXPECT_EQ(s.rfind("ck.rckpt.tmp-", 0), 0u) << when << ": " << s;
  }

  std::string dir_;
  std::string path_;
  uint64_t old_digest_ = 0;
};

TEST_F(CrashSaveTest, SaveKilledAtAnyProgressPointKeepsThePreviousCheckpoint) {
  constexpr uint64_t kTotal = kNewMib << 20;
  constexpr int kPoints = 12;
  for (int k = 0; k <= kPoints; ++k) {
    const uint64_t kill_at = kTotal * k / kPoints;
    const std::string when = "killed at " + std::to_string(kill_at) + " bytes";
    int status = 0;
    RunChild({RCKPT_RELIABILITY_CHILD, "save", path_, std::to_string(kNewSeed),
              std::to_string(kNewMib), std::to_string(kill_at)},
             &status);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << when;
    ExpectSoundCheckpoint(path_, {old_digest_}, when);
    ExpectAtMostOneTemporary(when);
  }
  // The next save cleans up the dead save's temporary.
  const Checkpoint next = MakeCheckpoint(3, 1);
  ASSERT_OK(Save(path_, next));
  EXPECT_THAT(Strays(dir_, "ck.rckpt"), ::testing::IsEmpty());
  ExpectSoundCheckpoint(path_, {Digest(next)}, "after the next save");
}

TEST_F(CrashSaveTest, SaveKilledAtAnyMomentLeavesTheOldOrTheNewCheckpoint) {
  // How long a whole save takes here, child start-up included.
  const std::string calibrate = dir_ + "/calibrate.rckpt";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(RunChild({RCKPT_RELIABILITY_CHILD, "save", calibrate, std::to_string(kNewSeed),
                      std::to_string(kNewMib), "-1"}),
            "OK\t");
  const auto full = std::chrono::steady_clock::now() - t0;
  fs::remove(calibrate);
  const uint64_t new_digest = Digest(MakeCheckpoint(kNewSeed, kNewMib));

  // Kill moments spread over the whole save, past its end included (then the
  // new file must be complete).
  constexpr int kMoments = 10;
  for (int k = 1; k <= kMoments; ++k) {
    const auto delay = full * k / (kMoments - 1);
    Child child({RCKPT_RELIABILITY_CHILD, "save", path_, std::to_string(kNewSeed),
                 std::to_string(kNewMib), "-1"});
    ASSERT_TRUE(child.started());
    std::this_thread::sleep_for(delay);
    child.Kill();
    child.Wait();
    const std::string when =
        "killed after " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()) +
        " ms";
    ExpectSoundCheckpoint(path_, {old_digest_, new_digest}, when);
    ExpectAtMostOneTemporary(when);
  }
}

TEST_F(CrashSaveTest, FileSizeLimitGivesIoErrorAndKeepsThePreviousCheckpoint) {
  const std::string out = RunChild({RCKPT_RELIABILITY_CHILD, "save-fsize", path_,
                                    std::to_string(kNewSeed), "8", std::to_string(1 << 20)});
  EXPECT_EQ(out.rfind("IoError\t", 0), 0u) << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << out;  // one line
  EXPECT_THAT(Strays(dir_, "ck.rckpt"), ::testing::IsEmpty());
  ExpectSoundCheckpoint(path_, {old_digest_}, "after the failed save");
}

TEST_F(CrashSaveTest, FullTmpfsGivesIoErrorAndKeepsThePreviousCheckpoint) {
  const std::string mnt = dir_ + "/small";
  fs::create_directories(mnt);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  }
  const std::string path = mnt + "/ck.rckpt";
  ASSERT_OK(Save(path, MakeCheckpoint(kOldSeed, kOldMib)));
  const Status s = Save(path, MakeCheckpoint(kNewSeed, 8));
  EXPECT_THAT(s, StatusIs(StatusCode::kIoError, "No space left on device"));
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  const auto strays = Strays(mnt, "ck.rckpt");
  ExpectSoundCheckpoint(path, {old_digest_}, "after the failed save");
  umount2(mnt.c_str(), MNT_DETACH);
  EXPECT_THAT(strays, ::testing::IsEmpty());
}

#ifdef RCKPT_CLI
TEST_F(CrashSaveTest, CliConvertKilledAtAnyMomentLeavesAVerifiableFile) {
  const std::string src_dir = testing::NewTempDir("crash-save-src");
  const std::string src = src_dir + "/src.rckpt";
  ASSERT_OK(Save(src, MakeCheckpoint(kNewSeed, 32)));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string calibrate = src_dir + "/calibrate.rckpt";
  int status = 0;
  RunChild({RCKPT_CLI, "convert", src, calibrate}, &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto full = std::chrono::steady_clock::now() - t0;
  fs::remove(calibrate);
  for (int k = 1; k <= 5; ++k) {
    Child child({RCKPT_CLI, "convert", src, path_});
    std::this_thread::sleep_for(full * k / 4);
    child.Kill();
    child.Wait();
    RunChild({RCKPT_CLI, "verify", path_}, &status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "kill " << k;
    ExpectAtMostOneTemporary("kill " + std::to_string(k));
  }
  fs::remove_all(src_dir);
}
#endif

}  // namespace
}  // namespace rckpt::reliability
