#include "io/atomic_write.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <string>

#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

std::string Temp(const std::string& path, pid_t pid) {
  return path + ".tmp-" + std::to_string(pid) + "-0123456789abcdef";
}

TEST(TempPathForTest, AppendsPidAndSixteenHexDigits) {
  const std::string temp = TempPathFor("dir/run.rckpt");
  const std::regex format("dir/run\\.rckpt\\.tmp-" +
                          std::to_string(::getpid()) + "-[0-9a-f]{16}");
  EXPECT_TRUE(std::regex_match(temp, format)) << temp;
}

TEST(TempPathForTest, NamesDiffer) {
  std::set<std::string> names;
  for (int i = 0; i < 1000; ++i) names.insert(TempPathFor("a"));
  EXPECT_EQ(names.size(), 1000u);
}

TEST(RemoveStaleTempsTest, RemovesDeadPidTempsOnlyOnMemFs) {
  MemFileSystem fsys;
  const pid_t dead = DeadPid();
  const pid_t live = ::getpid();
  fsys.SetFile("d/run.rckpt", {});
  fsys.SetFile(Temp("d/run.rckpt", dead), {});
  fsys.SetFile(Temp("d/run.rckpt", live), {});
  fsys.SetFile(Temp("d/other.rckpt", dead), {});  // another path's
  fsys.SetFile("d/run.rckpt.tmp-" + std::to_string(dead) + "-xyz",
               {});  // not ours
  fsys.SetFile("d/run.rckpt.tmp-" + std::to_string(dead) + "-0123456789ABCDEF",
               {});
  fsys.SetFile("d/run.rckpt.tmp--5-0123456789abcdef", {});
  RemoveStaleTemps(fsys, "d/run.rckpt");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fsys.ListDir("d"));
  const std::string d = std::to_string(dead);
  EXPECT_THAT(names,
              UnorderedElementsAre("run.rckpt", Temp("run.rckpt", live),
                                   Temp("other.rckpt", dead),
                                   "run.rckpt.tmp-" + d + "-xyz",
                                   "run.rckpt.tmp-" + d + "-0123456789ABCDEF",
                                   "run.rckpt.tmp--5-0123456789abcdef"));
}

TEST(RemoveStaleTempsTest, RemovesDeadPidTempsOnPosixFs) {
  const std::string dir = testing::NewTempDir("stale");
  const std::string path = dir + "/ck.rckpt";
  const pid_t dead = DeadPid();
  for (const std::string& p : {path, Temp(path, dead), Temp(path, ::getpid()),
                               Temp(path, 1), dir + "/unrelated"}) {
    std::ofstream(p) << "x";
  }
  RemoveStaleTemps(PosixFileSystem(), path);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names,
                       PosixFileSystem().ListDir(dir));
  EXPECT_THAT(names,
              UnorderedElementsAre("ck.rckpt", Temp("ck.rckpt", ::getpid()),
                                   Temp("ck.rckpt", 1), "unrelated"));
}

TEST(RemoveStaleTempsTest, AZombiesTempIsStale) {
  // A process that exited and was not reaped (its parent died where no init
  // reaps, as a killed job's rank in some containers) never writes again.
  const std::string dir = testing::NewTempDir("zombie");
  const std::string path = dir + "/ck.rckpt";
  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  // Not reaped yet: wait until it has exited, leaving it a zombie.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  std::ofstream(Temp(path, zombie)) << "x";
  RemoveStaleTemps(PosixFileSystem(), path);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, PosixFileSystem().ListDir(dir));
  EXPECT_TRUE(names.empty()) << names.size();
  ::waitpid(zombie, nullptr, 0);
}

TEST(RemoveStaleTempsTest, PathWithoutDirectoryUsesCurrentDirectory) {
  MemFileSystem fsys;
  const pid_t dead = DeadPid();
  fsys.SetFile("ck", {});
  fsys.SetFile(Temp("ck", dead), {});
  RemoveStaleTemps(fsys, "ck");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fsys.ListDir("."));
  EXPECT_THAT(names, ElementsAre("ck"));
}

TEST(RemoveIfExistsTest, MissingFileIsOk) {
  MemFileSystem fsys;
  fsys.SetFile("a", {});
  EXPECT_OK(RemoveIfExists(fsys, "a"));
  EXPECT_FALSE(fsys.Exists("a"));
  EXPECT_OK(RemoveIfExists(fsys, "a"));
}

std::vector<std::byte> BytesOf(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

Status AppendText(WritableFile& f, const std::string& text) {
  return f.Append(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

// Only `keep` is left in the directory: no temporary survives.
void ExpectOnly(MemFileSystem& fsys, const std::string& keep) {
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fsys.ListDir("d"));
  EXPECT_THAT(names, ElementsAre(keep));
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileWithTheWholeContent) {
  MemFileSystem fsys;
  fsys.SetFile("d/ck", BytesOf("old"));
  ASSERT_OK(WriteFileAtomically(fsys, "d/ck", [](WritableFile& f) {
    RCKPT_RETURN_IF_ERROR(AppendText(f, "new "));
    return AppendText(f, "content");
  }));
  EXPECT_EQ(*fsys.GetFile("d/ck"), BytesOf("new content"));
  ExpectOnly(fsys, "ck");
}

TEST(WriteFileAtomicallyTest, WriterErrorKeepsThePreviousFileAndRemovesTheTemporary) {
  MemFileSystem fsys;
  fsys.SetFile("d/ck", BytesOf("old"));
  Status s = WriteFileAtomically(fsys, "d/ck", [](WritableFile& f) {
    RCKPT_RETURN_IF_ERROR(AppendText(f, "half"));
    return Status::Corruption("the writer gave up");
  });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(*fsys.GetFile("d/ck"), BytesOf("old"));
  ExpectOnly(fsys, "ck");
}

// Fault `n` of the three a write can meet: a full disk, a failed fsync, a
// failed rename.
MemFileSystem::Faults Fault(int n) {
  MemFileSystem::Faults faults;
  if (n == 0) faults.fail_write_after_bytes = 2;
  if (n == 1) faults.fail_sync = true;
  if (n == 2) faults.fail_rename = true;
  return faults;
}

TEST(WriteFileAtomicallyTest, FullDiskSyncAndRenameFailuresKeepThePreviousFile) {
  for (int fault = 0; fault < 3; ++fault) {
    SCOPED_TRACE(fault);
    MemFileSystem fsys;
    fsys.SetFile("d/ck", BytesOf("old"));
    fsys.SetFaults(Fault(fault));
    Status s = WriteFileAtomically(fsys, "d/ck",
                                   [](WritableFile& f) { return AppendText(f, "new"); });
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_EQ(*fsys.GetFile("d/ck"), BytesOf("old"));
    ExpectOnly(fsys, "ck");
  }
}

TEST(WriteFileAtomicallyTest, FailuresNameThePathNeverTheTemporary) {
  for (int fault = 0; fault < 3; ++fault) {
    SCOPED_TRACE(fault);
    MemFileSystem fsys;
    fsys.SetFaults(Fault(fault));
    Status s = WriteFileAtomically(fsys, "d/ck",
                                   [](WritableFile& f) { return AppendText(f, "new"); });
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_THAT(s.message(), ::testing::HasSubstr("'d/ck'"));
    EXPECT_THAT(s.message(), ::testing::Not(::testing::HasSubstr(".tmp-")));
  }
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OpenForAtomicCreateTest, CommitNeverReplacesAnExistingFile) {
  const std::string dir = testing::NewTempDir("atomic-create");
  const std::string path = dir + "/ck";
  auto write = [&](const std::string& text) {
    return WriteFileAtomically(
        PosixFileSystem(), path, [&](WritableFile& f) { return AppendText(f, text); }, 0,
        /*replace=*/false);
  };
  ASSERT_OK(write("first"));
  EXPECT_THAT(write("second"), StatusIs(StatusCode::kAlreadyExists, "'" + path + "' already exists"));
  EXPECT_EQ(ReadText(path), "first");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, PosixFileSystem().ListDir(dir));
  EXPECT_THAT(names, ElementsAre("ck"));  // the refused write's temporary is gone
}

TEST(OpenForAtomicCreateTest, TheFileAppearingDuringTheWriteWins) {
  const std::string dir = testing::NewTempDir("atomic-create-race");
  const std::string path = dir + "/ck";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<AtomicWritableFile> file,
                       PosixFileSystem().OpenForAtomicCreate(path));
  ASSERT_OK(AppendText(*file, "mine"));
  std::ofstream(path) << "theirs";  // another writer commits first
  EXPECT_EQ(file->Commit().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadText(path), "theirs");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, PosixFileSystem().ListDir(dir));
  EXPECT_THAT(names, ElementsAre("ck"));
}

TEST(OpenForAtomicCreateTest, RenameNoReplaceIsUnsupportedWhereAFileSystemLacksIt) {
  MemFileSystem fsys;
  fsys.SetFile("d/a", BytesOf("a"));
  EXPECT_EQ(fsys.RenameNoReplace("d/a", "d/b").code(), StatusCode::kUnsupported);
  Status s = WriteFileAtomically(
      fsys, "d/ck", [](WritableFile& f) { return AppendText(f, "x"); }, 0, /*replace=*/false);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_FALSE(fsys.Exists("d/ck"));
}

TEST(AtomicFileTest, APathInAMissingDirectoryIsNotFoundNamingTheDirectory) {
  const std::string dir = testing::NewTempDir("missing-parent");
  AtomicFile target(PosixFileSystem(), dir + "/absent/ck.rckpt");
  Result<std::unique_ptr<WritableFile>> f = target.Open();
  EXPECT_THAT(f.status(), StatusIs(StatusCode::kNotFound,
                                   "directory '" + dir + "/absent' does not exist"));
  EXPECT_THAT(f.status().message(), ::testing::Not(::testing::HasSubstr(".tmp-")));
}

TEST(AtomicFileTest, ADirectoryAtThePathIsRefusedBeforeATemporaryIsCreated) {
  const std::string dir = testing::NewTempDir("directory-at-path");
  std::filesystem::create_directory(dir + "/ck.rckpt");
  AtomicFile target(PosixFileSystem(), dir + "/ck.rckpt");
  Result<std::unique_ptr<WritableFile>> f = target.Open();
  EXPECT_THAT(f.status(), StatusIs(StatusCode::kInvalidArgument,
                                   "'" + dir + "/ck.rckpt' is a directory: expected a file path"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, PosixFileSystem().ListDir(dir));
  EXPECT_THAT(names, ElementsAre("ck.rckpt"));  // no temporary beside it
}

TEST(AtomicFileTest, AnAbandonedTemporaryIsRemovedAndACommittedOneIsThePath) {
  MemFileSystem fsys;
  std::string temp;
  {
    AtomicFile target(fsys, "d/ck");
    temp = target.temp_path();
    EXPECT_TRUE(temp.starts_with("d/ck.tmp-"));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f, target.Open());
    ASSERT_OK(AppendText(*f, "abandoned"));
    ASSERT_OK(f->Close());
    EXPECT_TRUE(fsys.Exists(temp));
  }
  EXPECT_FALSE(fsys.Exists(temp));
  EXPECT_FALSE(fsys.Exists("d/ck"));
  {
    AtomicFile target(fsys, "d/ck");
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f, target.Open());
    ASSERT_OK(AppendText(*f, "kept"));
    ASSERT_OK(f->Sync());
    ASSERT_OK(f->Close());
    ASSERT_OK(target.Commit());
  }
  EXPECT_EQ(*fsys.GetFile("d/ck"), BytesOf("kept"));
  ExpectOnly(fsys, "ck");
}

TEST(AtomicFileTest, RemovesStaleTemporariesOfThePathWhenCreated) {
  MemFileSystem fsys;
  const std::string stale = Temp("d/ck", DeadPid());
  fsys.SetFile(stale, BytesOf("crashed"));
  AtomicFile target(fsys, "d/ck");
  EXPECT_FALSE(fsys.Exists(stale));
}

}  // namespace
}  // namespace rckpt
