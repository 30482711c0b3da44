// The file interfaces' defaults (atomic writes, listings, incomplete writes)
// and the choice of a file system by URL.
#include "io/url_file_system.h"

#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_write.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::ElementsAre;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(AtomicWritableFileTest, CommitReplacesAndAbortLeavesNothing) {
  MemFileSystem fs;
  fs.SetFile("d/ck", {std::byte{1}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<AtomicWritableFile> w, fs.OpenForAtomicWrite("d/ck", 3));
  ASSERT_OK(w->Append(Bytes("new")));
  EXPECT_EQ(fs.GetFile("d/ck")->size(), 1u);  // not visible before Commit
  ASSERT_OK(w->Commit());
  EXPECT_EQ(fs.GetFile("d/ck")->size(), 3u);
  EXPECT_THAT(w->Append(Bytes("x")), StatusIs(StatusCode::kInvalidArgument, "committed"));
  ASSERT_OK_AND_ASSIGN(w, fs.OpenForAtomicWrite("d/ck"));
  ASSERT_OK(w->Append(Bytes("abandoned")));
  ASSERT_OK(w->Abort());
  ASSERT_OK(w->Abort());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fs.ListDir("d"));
  EXPECT_THAT(names, ElementsAre("ck"));
  EXPECT_EQ(fs.GetFile("d/ck")->size(), 3u);
}

TEST(FileSystemDefaultsTest, ListWalksPrefixesAndIncompleteWritesAreTheTemporaries) {
  MemFileSystem fs;
  const pid_t dead = DeadPid();
  fs.SetFile("run/a.rckpt", std::vector<std::byte>(5));
  fs.SetFile("run/sub/b.rckpt", std::vector<std::byte>(7));
  fs.SetFile("runner.rckpt", {});
  fs.SetFile("run/a.rckpt.tmp-" + std::to_string(dead) + "-0123456789abcdef", {});
  fs.SetFile("run/a.rckpt.tmp-" + std::to_string(::getpid()) + "-fedcba9876543210", {});
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> all, fs.List("run"));
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].path, "run/a.rckpt");
  EXPECT_EQ(all[0].size, 5u);
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> sub, fs.List("run/sub/"));
  ASSERT_EQ(sub.size(), 1u);
  EXPECT_EQ(sub[0].path, "run/sub/b.rckpt");
  ASSERT_OK_AND_ASSIGN(std::vector<FileInfo> none, fs.List("nothing/here"));
  EXPECT_TRUE(none.empty());

  ASSERT_OK_AND_ASSIGN(std::vector<IncompleteWrite> open, fs.ListIncomplete("run/"));
  ASSERT_EQ(open.size(), 2u);
  for (const IncompleteWrite& w : open) EXPECT_EQ(w.path, "run/a.rckpt");
  const IncompleteWrite& crashed = open[0].writer_alive ? open[1] : open[0];
  const IncompleteWrite& running = open[0].writer_alive ? open[0] : open[1];
  EXPECT_FALSE(crashed.writer_alive);
  EXPECT_TRUE(running.writer_alive);
  EXPECT_THAT(fs.AbortIncomplete(running),
              StatusIs(StatusCode::kInvalidArgument, "is still being written by process"));
  ASSERT_OK(fs.AbortIncomplete(crashed));
  EXPECT_FALSE(fs.Exists(crashed.id));
  EXPECT_THAT(fs.AbortIncomplete(IncompleteWrite{"run/a.rckpt", "run/other", 0, false}),
              StatusIs(StatusCode::kInvalidArgument, "is not a temporary of a save"));
}

TEST(UrlFileSystemTest, PicksTheFileSystemByUrlAndMakesS3OnceAtFirstUse) {
  MemFileSystem local;
  auto* remote = new MemFileSystem;
  int made = 0;
  UrlFileSystem fs(local, [&]() -> Result<std::unique_ptr<FileSystem>> {
    ++made;
    return std::unique_ptr<FileSystem>(remote);
  });
  local.SetFile("a", {std::byte{1}});
  EXPECT_TRUE(fs.Exists("a"));
  EXPECT_EQ(made, 0);  // nothing made for local paths
  remote->SetFile("s3://b/k", {std::byte{2}, std::byte{3}});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> f, fs.OpenForRead("s3://b/k"));
  EXPECT_EQ(f->Size(), 2u);
  EXPECT_FALSE(fs.Exists("s3://b/a"));
  EXPECT_EQ(made, 1);
  EXPECT_THAT(fs.Rename("a", "s3://b/a"),
              StatusIs(StatusCode::kInvalidArgument, "between object storage and a local disk"));
  EXPECT_TRUE(IsObjectStoreUrl("s3://x"));
  EXPECT_FALSE(IsObjectStoreUrl("S3://x"));
  EXPECT_FALSE(IsObjectStoreUrl("dir/s3://x"));
}

// "S3://" is neither an object-storage URL nor a local path: refused by
// every call, never a folder named "S3:" (Python's rckpt.s3.is_url holds the
// same rule).
TEST(UrlFileSystemTest, TheSchemeInAnotherCaseIsRefusedNeverALocalPath) {
  MemFileSystem local;
  int made = 0;
  UrlFileSystem fs(local, [&]() -> Result<std::unique_ptr<FileSystem>> {
    ++made;
    return std::unique_ptr<FileSystem>(new MemFileSystem);
  });
  EXPECT_THAT(fs.OpenForAtomicWrite("S3://b/k", 0),
              StatusIs(StatusCode::kInvalidArgument,
                       "'S3://b/k': an object-storage URL begins with s3:// in lower case"));
  // Local paths, whatever they look like.
  EXPECT_EQ(fs.OpenForRead("sS://b/k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs.OpenForRead("s3:/b/k").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(fs.ListDir("S3://b/"), StatusIs(StatusCode::kInvalidArgument, "in lower case"));
  EXPECT_THAT(fs.Rename("s3://b/a", "S3://b/c"),
              StatusIs(StatusCode::kInvalidArgument, "'S3://b/c': an object-storage URL"));
  EXPECT_FALSE(fs.Exists("S3://b/k"));
  EXPECT_OK(CheckSchemeCase("s3://x"));
  EXPECT_OK(CheckSchemeCase("S3:"));
  EXPECT_EQ(made, 0);
  EXPECT_FALSE(local.Exists("S3://b/k"));
}

TEST(UrlFileSystemTest, AnS3SetUpErrorIsEveryS3CallsAndLocalPathsStillWork) {
  MemFileSystem local;
  int made = 0;
  UrlFileSystem fs(local, [&]() -> Result<std::unique_ptr<FileSystem>> {
    ++made;
    return Status::Unsupported("built without S3 support");
  });
  EXPECT_THAT(fs.OpenForRead("s3://b/k"), StatusIs(StatusCode::kUnsupported, "without S3"));
  EXPECT_THAT(fs.OpenForAtomicWrite("s3://b/k", 0),
              StatusIs(StatusCode::kUnsupported, "without S3"));
  EXPECT_EQ(made, 1);
  ASSERT_OK(WriteFileAtomically(fs, "x", [](WritableFile& w) { return w.Append(Bytes("ok")); }));
  EXPECT_EQ(local.GetFile("x")->size(), 2u);
}

}  // namespace
}  // namespace rckpt
