#include "io/posix_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

namespace rckpt {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

std::vector<std::byte> Iota(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 7 + 1);
  return v;
}

void WriteFile(FileSystem& fsys, const std::string& path,
               std::span<const std::byte> bytes) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f,
                       fsys.OpenForWrite(path));
  ASSERT_OK(f->Append(bytes));
  ASSERT_OK(f->Sync());
  ASSERT_OK(f->Close());
}

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)),
                std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

class PosixFileTest : public ::testing::Test {
 protected:
  FileSystem& fsys_ = PosixFileSystem();
  std::string dir_ = testing::NewTempDir("posix");
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
};

TEST_F(PosixFileTest, WriteThenReadBackAtOffsets) {
  const std::vector<std::byte> data = Iota(10000);
  WriteFile(fsys_, Path("a"), data);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f,
                       fsys_.OpenForRead(Path("a")));
  EXPECT_EQ(f->Size(), 10000u);
  std::vector<std::byte> part(1234);
  ASSERT_OK(f->ReadAt(5000, part));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 5000));
  std::vector<std::byte> whole(10000);
  ASSERT_OK(f->ReadAt(0, whole));
  EXPECT_EQ(whole, data);
  ASSERT_OK(f->ReadAt(10000, std::span<std::byte>()));
}

TEST_F(PosixFileTest, OpenForWriteTruncatesExistingFile) {
  WriteFile(fsys_, Path("a"), Iota(100));
  WriteFile(fsys_, Path("a"), Iota(10));
  EXPECT_EQ(ReadAll(Path("a")), Iota(10));
}

TEST_F(PosixFileTest, AppendsAreSequential) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f,
                       fsys_.OpenForWrite(Path("a")));
  const std::vector<std::byte> data = Iota(300);
  ASSERT_OK(f->Append(std::span(data).first(100)));
  ASSERT_OK(f->Append(std::span(data).subspan(100)));
  ASSERT_OK(f->Close());
  EXPECT_EQ(ReadAll(Path("a")), data);
}

TEST_F(PosixFileTest, ChunkedWriteAndReadLoopsMoveEveryByte) {
  const std::vector<std::byte> data = Iota(100003);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f,
                         OpenPosixWritableFile(Path("a"), 4093));
    ASSERT_OK(f->Append(data));
    ASSERT_OK(f->Close());
  }
  EXPECT_EQ(ReadAll(Path("a")), data);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       OpenPosixRandomAccessFile(Path("a"), 1000));
  std::vector<std::byte> back(data.size() - 7);
  ASSERT_OK(r->ReadAt(7, back));
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin() + 7));
}

TEST_F(PosixFileTest, ReadPastEndIsCorruptionNamingSizes) {
  WriteFile(fsys_, Path("a"), Iota(100));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f,
                       fsys_.OpenForRead(Path("a")));
  std::vector<std::byte> buf(50);
  EXPECT_THAT(
      f->ReadAt(60, buf),
      StatusIs(StatusCode::kCorruption,
               "truncated: wanted 50 bytes at offset 60, file has 100"));
  EXPECT_THAT(f->ReadAt(UINT64_MAX - 10, buf),
              StatusIs(StatusCode::kCorruption, "truncated"));
}

TEST_F(PosixFileTest, ReadOfFileShrunkAfterOpenIsCorruption) {
  WriteFile(fsys_, Path("a"), Iota(1000));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f,
                       fsys_.OpenForRead(Path("a")));
  ASSERT_EQ(::truncate(Path("a").c_str(), 10), 0);
  std::vector<std::byte> buf(100);
  EXPECT_THAT(f->ReadAt(500, buf),
              StatusIs(StatusCode::kCorruption, "file has 10"));
}

TEST_F(PosixFileTest, OpenMissingFileIsNotFound) {
  EXPECT_THAT(fsys_.OpenForRead(Path("missing")),
              StatusIs(StatusCode::kNotFound, "missing"));
  EXPECT_THAT(fsys_.OpenForRead(Path("missing/below")),
              StatusIs(StatusCode::kNotFound, "below"));
}

TEST_F(PosixFileTest, OpenDirectoryIsInvalidArgument) {
  EXPECT_THAT(fsys_.OpenForRead(dir_),
              StatusIs(StatusCode::kInvalidArgument, "directory"));
  EXPECT_THAT(fsys_.OpenForWrite(dir_),
              StatusIs(StatusCode::kInvalidArgument, dir_));
}

TEST_F(PosixFileTest, OpenFifoIsInvalidArgumentWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_THAT(fsys_.OpenForRead(Path("fifo")),
              StatusIs(StatusCode::kInvalidArgument, "special file"));
}

TEST_F(PosixFileTest, CreateInMissingDirectoryIsNotFound) {
  EXPECT_THAT(fsys_.OpenForWrite(Path("nodir/a")),
              StatusIs(StatusCode::kNotFound, "nodir/a"));
}

TEST_F(PosixFileTest, WriteToFullDeviceIsIoErrorNamingPath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f,
                       fsys_.OpenForWrite("/dev/full"));
  const std::vector<std::byte> data = Iota(10);
  EXPECT_THAT(f->Append(data),
              StatusIs(StatusCode::kIoError,
                       "'/dev/full' (0 of 10 bytes written): No space"));
}

TEST_F(PosixFileTest, WritePastFileSizeLimitIsIoErrorNamingPath) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG; set it in a child only.
  const std::string path = Path("big");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto f = OpenPosixWritableFile(path, 1000);
    if (!f.ok()) ::_exit(2);
    const Status s = (*f)->Append(Iota(10000));
    const bool matches =
        s.code() == StatusCode::kIoError &&
        s.message().find("'" + path + "' (4096 of 10000") !=
            std::string::npos &&
        s.message().find("File too large") != std::string::npos;
    ::_exit(matches ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(fs::file_size(path), 4096u);
}

TEST_F(PosixFileTest, UseAfterCloseIsRefused) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> f,
                       fsys_.OpenForWrite(Path("a")));
  ASSERT_OK(f->Close());
  EXPECT_THAT(f->Append(Iota(1)),
              StatusIs(StatusCode::kInvalidArgument, "closed"));
  EXPECT_THAT(f->Sync(), StatusIs(StatusCode::kInvalidArgument, "closed"));
  EXPECT_THAT(f->Close(), StatusIs(StatusCode::kInvalidArgument, "closed"));
}

TEST_F(PosixFileTest, RenameReplacesTarget) {
  WriteFile(fsys_, Path("new"), Iota(5));
  WriteFile(fsys_, Path("old"), Iota(50));
  ASSERT_OK(fsys_.Rename(Path("new"), Path("old")));
  EXPECT_FALSE(fsys_.Exists(Path("new")));
  EXPECT_EQ(ReadAll(Path("old")), Iota(5));
  ASSERT_OK(fsys_.SyncParentDir(Path("old")));
}

TEST_F(PosixFileTest, OpenReaderKeepsBytesAfterRenameOver) {
  WriteFile(fsys_, Path("a"), Iota(100));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       fsys_.OpenForRead(Path("a")));
  WriteFile(fsys_, Path("b"), Iota(3));
  ASSERT_OK(fsys_.Rename(Path("b"), Path("a")));
  std::vector<std::byte> buf(100);
  ASSERT_OK(r->ReadAt(0, buf));
  EXPECT_EQ(buf, Iota(100));
}

TEST_F(PosixFileTest, RenameOfMissingFileIsNotFound) {
  EXPECT_THAT(fsys_.Rename(Path("x"), Path("y")),
              StatusIs(StatusCode::kNotFound, "rename"));
}

TEST_F(PosixFileTest, RemoveDeletesAndMissingIsNotFound) {
  WriteFile(fsys_, Path("a"), Iota(5));
  EXPECT_TRUE(fsys_.Exists(Path("a")));
  ASSERT_OK(fsys_.Remove(Path("a")));
  EXPECT_FALSE(fsys_.Exists(Path("a")));
  EXPECT_THAT(fsys_.Remove(Path("a")),
              StatusIs(StatusCode::kNotFound, "remove"));
}

TEST_F(PosixFileTest, ListDirReturnsSortedNames) {
  WriteFile(fsys_, Path("b"), Iota(1));
  WriteFile(fsys_, Path("a"), Iota(1));
  fs::create_directory(Path("sub"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fsys_.ListDir(dir_));
  EXPECT_THAT(names, ElementsAre("a", "b", "sub"));
}

TEST_F(PosixFileTest, ListDirOfMissingOrFileFails) {
  EXPECT_THAT(fsys_.ListDir(Path("missing")),
              StatusIs(StatusCode::kNotFound, "missing"));
  WriteFile(fsys_, Path("a"), Iota(1));
  EXPECT_THAT(fsys_.ListDir(Path("a")),
              StatusIs(StatusCode::kInvalidArgument, "not a directory"));
}

TEST_F(PosixFileTest, SyncParentDirOfPathWithoutDirectoryUsesCwd) {
  EXPECT_OK(fsys_.SyncParentDir("relative-name"));
  EXPECT_THAT(fsys_.SyncParentDir(Path("missing/a")),
              StatusIs(StatusCode::kNotFound, "missing"));
}

TEST_F(PosixFileTest, DescriptorsAreCloseOnExec) {
  WriteFile(fsys_, Path("a"), Iota(1));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       fsys_.OpenForRead(Path("a")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w,
                       fsys_.OpenForWrite(Path("b")));
  // Every descriptor this process opened for the files above is O_CLOEXEC.
  int checked = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(entry.path(), ec);
    if (ec || target.parent_path() != fs::path(dir_)) continue;
    const int fd = std::stoi(entry.path().filename().string());
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << target;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// Two handles of one file write at offsets of their own, as two ranks of a
// collective save do; the file keeps what was before the offsets written.
TEST_F(PosixFileTest, PositionedWritesFromTwoHandlesLandAtTheirOffsets) {
  WriteFile(fsys_, Path("shared"), std::vector<std::byte>(8, std::byte{0xEE}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PositionedWritableFile> a,
                       fsys_.OpenForPositionedWrite(Path("shared")));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PositionedWritableFile> b,
                       fsys_.OpenForPositionedWrite(Path("shared")));
  const std::vector<std::byte> data = Iota(16);
  ASSERT_OK(b->WriteAt(12, std::span(data).subspan(12, 4)));
  ASSERT_OK(a->WriteAt(4, std::span(data).subspan(4, 4)));
  for (PositionedWritableFile* f : {a.get(), b.get()}) {
    ASSERT_OK(f->Sync());
    ASSERT_OK(f->Close());
  }
  std::vector<std::byte> expected(16, std::byte{0});
  for (int i = 0; i < 4; ++i) expected[i] = std::byte{0xEE};
  for (int i : {4, 5, 6, 7, 12, 13, 14, 15}) expected[i] = data[i];
  EXPECT_EQ(ReadAll(Path("shared")), expected);
  EXPECT_THAT(fsys_.OpenForPositionedWrite(Path("missing")), StatusIs(StatusCode::kNotFound, ""));
}

TEST_F(PosixFileTest, CreateDirMakesParentsAndRemoveAllTakesATree) {
  ASSERT_OK(fsys_.CreateDir(Path("a/b/c")));
  ASSERT_OK(fsys_.CreateDir(Path("a/b/c")));  // there already: fine
  WriteFile(fsys_, Path("a/b/c/f"), Iota(3));
  WriteFile(fsys_, Path("a/g"), Iota(3));
  EXPECT_THAT(fsys_.CreateDir(Path("a/g")), StatusIs(StatusCode::kInvalidArgument, "a file is there"));
  EXPECT_THAT(fsys_.CreateDir(Path("a/g/h")),
              StatusIs(StatusCode::kInvalidArgument, "a file is in the way"));
  std::filesystem::create_symlink(Path("a"), Path("link"));
  ASSERT_OK(fsys_.RemoveAll(Path("link")));  // the link, never what it points to
  EXPECT_TRUE(std::filesystem::exists(Path("a/b/c/f")));
  ASSERT_OK(fsys_.RemoveAll(Path("a/g")));
  ASSERT_OK(fsys_.RemoveAll(Path("a")));
  EXPECT_FALSE(std::filesystem::exists(Path("a")));
  EXPECT_THAT(fsys_.RemoveAll(Path("a")), StatusIs(StatusCode::kNotFound, ""));
}

}  // namespace
}  // namespace rckpt
