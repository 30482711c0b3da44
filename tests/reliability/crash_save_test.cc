// Writes that lose nothing: a save killed with SIGKILL at any point, or
// stopped by a full disk, leaves the previous checkpoint at its path loadable
// and verifiable, and at most one stray temporary that the next save removes.
// Every kill point is an event (a progress report, a file-system call, a
// system call), never a moment on a clock.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>

#include "format/file_reader.h"
#include "reliability/child_process.h"
#include "reliability/reliability_util.h"
#include "reliability/syscall_steps.h"
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

TEST_F(CrashSaveTest, SaveKilledAtEveryStepLeavesTheOldCheckpointUntilTheRenameThenTheNew) {
  // The child announces every step of its save (each file-system call, each
  // progress report, the return) and waits at it until told to go on; the
  // test kills it while it waits at step k, for every k. Before the rename
  // has happened the path must hold the old checkpoint, after it the new one.
  constexpr uint64_t kStepMib = 8;
  const std::vector<std::string> argv = {RCKPT_RELIABILITY_CHILD, "save-steps", path_,
                                         std::to_string(kNewSeed), std::to_string(kStepMib)};
  const uint64_t new_digest = Digest(MakeCheckpoint(kNewSeed, kStepMib));

  // One run to the end lists the steps; then the old checkpoint is put back.
  std::vector<std::string> steps;
  {
    Child child(argv, /*pipe_stdin=*/true);
    ASSERT_TRUE(child.started());
    std::string line;
    while (child.ReadLine(&line) && line.rfind("STEP ", 0) == 0) {
      steps.push_back(line.substr(line.find(' ', 5) + 1));
      ASSERT_TRUE(child.Send()) << "at " << line;
    }
    EXPECT_EQ(line, "OK\t");
    const int status = child.Wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << child.output();
    ExpectSoundCheckpoint(path_, {new_digest}, "after the whole save");
    ASSERT_OK(Save(path_, MakeCheckpoint(kOldSeed, kOldMib)));
  }
  const auto is = [](const std::string& step, const char* what) {
    return step.rfind(what, 0) == 0;
  };
  const auto rename_step = std::find_if(steps.begin(), steps.end(), [&](const std::string& s) {
    return is(s, "rename ");
  });
  ASSERT_NE(rename_step, steps.end()) << "the save never renamed";
  const size_t renamed_at = rename_step - steps.begin();
  // The steps a save must have: its data, its progress, a sync before the
  // rename, and the directory sync after it.
  EXPECT_GE(std::count_if(steps.begin(), steps.end(), [&](auto& s) { return is(s, "append "); }),
            static_cast<long>(kStepMib * 4));
  EXPECT_GE(std::count_if(steps.begin(), steps.end(), [&](auto& s) { return is(s, "progress "); }),
            static_cast<long>(kStepMib * 4));
  EXPECT_TRUE(std::any_of(steps.begin(), rename_step, [&](auto& s) { return is(s, "sync "); }));
  EXPECT_TRUE(std::any_of(rename_step, steps.end(), [&](auto& s) { return is(s, "sync-dir "); }));
  EXPECT_EQ(steps.back(), "returned");

  for (size_t k = 0; k < steps.size(); ++k) {
    const std::string when = "killed at step " + std::to_string(k) + " (before '" + steps[k] + "')";
    Child child(argv, /*pipe_stdin=*/true);
    ASSERT_TRUE(child.started());
    std::string line;
    for (size_t i = 0; i <= k; ++i) {
      ASSERT_TRUE(child.ReadLine(&line)) << when << ": the child ended early";
      ASSERT_EQ(line, "STEP " + std::to_string(i) + " " + steps[i]) << when;
      if (i < k) {
        ASSERT_TRUE(child.Send()) << when;
      }
    }
    child.Kill();
    const int status = child.Wait();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << when;
    ExpectSoundCheckpoint(path_, {k <= renamed_at ? old_digest_ : new_digest}, when);
    ExpectAtMostOneTemporary(when);
    if (HasFailure()) return;
    // The next run starts as the listing did: no temporary to clean up, the
    // old checkpoint at the path.
    for (const std::string& stray : Strays(dir_, "ck.rckpt")) fs::remove(dir_ + "/" + stray);
    if (k > renamed_at) ASSERT_OK(Save(path_, MakeCheckpoint(kOldSeed, kOldMib)));
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
TEST_F(CrashSaveTest, CliConvertKilledAtEveryFileChangeLeavesTheOldOrTheNewFileWhole) {
  // `rckpt convert` runs under ptrace and is killed before its k-th system
  // call that changes a file, for every k (syscall_steps.h).
  const std::string src_dir = testing::NewTempDir("crash-save-src");
  const std::string src = src_dir + "/src.rckpt";
  const Checkpoint converted = MakeCheckpoint(kNewSeed, 8);
  ASSERT_OK(Save(src, converted));
  const uint64_t new_digest = Digest(converted);
  const std::vector<std::string> argv = {RCKPT_CLI, "convert", src, path_};

  // A run to the end counts the steps, and writes the new file.
  const SteppedRun whole = RunKillingAtStep(argv, -1);
  ASSERT_EQ(whole.error, "") << "cannot run rckpt convert under ptrace here";
  ASSERT_TRUE(WIFEXITED(whole.wait_status) && WEXITSTATUS(whole.wait_status) == 0)
      << "wait status " << whole.wait_status;
  ExpectSoundCheckpoint(path_, {new_digest}, "after an uninterrupted convert");
  // Header, data, manifest and footer, sync, rename, directory sync at least.
  ASSERT_GE(whole.steps, 5);

  std::vector<bool> found_new;  // by kill step
  for (int k = 0; k < whole.steps; ++k) {
    ASSERT_OK(Save(path_, MakeCheckpoint(kOldSeed, kOldMib)));
    const std::string when = "killed before file change " + std::to_string(k) + " of " +
                             std::to_string(whole.steps);
    const SteppedRun run = RunKillingAtStep(argv, k);
    ASSERT_EQ(run.error, "") << when;
    ASSERT_TRUE(WIFSIGNALED(run.wait_status) && WTERMSIG(run.wait_status) == SIGKILL)
        << when << ": wait status " << run.wait_status;
    int status = 0;
    const std::string verify = RunChild({RCKPT_CLI, "verify", path_}, &status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << when << ": " << verify;
    ExpectSoundCheckpoint(path_, {old_digest_, new_digest}, when);
    ExpectAtMostOneTemporary(when);
    if (HasFailure()) break;
    Result<Checkpoint> now = Load(path_);
    ASSERT_TRUE(now.ok());
    found_new.push_back(Digest(*now) == new_digest);
    // Every run starts as the counting run did, with no temporary to remove.
    for (const std::string& stray : Strays(dir_, "ck.rckpt")) fs::remove(dir_ + "/" + stray);
  }
  // The old file until one step (the rename), the new one from there on.
  const auto first_new = std::find(found_new.begin(), found_new.end(), true);
  EXPECT_NE(first_new, found_new.begin()) << "the first file change already replaced the file";
  EXPECT_NE(first_new, found_new.end()) << "no kill found the new file";
  EXPECT_TRUE(std::all_of(first_new, found_new.end(), [](bool b) { return b; }))
      << "the path went back to the old file after holding the new one";
  fs::remove_all(src_dir);
}
#else
TEST_F(CrashSaveTest, CliConvertKilledAtEveryFileChangeLeavesTheOldOrTheNewFileWhole) {
  GTEST_SKIP() << "this build has no rckpt CLI (RCKPT_BUILD_TOOLS=OFF)";
}
#endif

}  // namespace
}  // namespace rckpt::reliability
