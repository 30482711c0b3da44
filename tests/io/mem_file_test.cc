#include <string>
#include <thread>
#include <vector>

#include "rckpt/file.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pointee;

std::vector<std::byte> Iota(size_t n, int start = 0) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(start + i);
  return v;
}

TEST(MemFileTest, WriteThenReadBack) {
  MemFileSystem fsys;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w,
                       fsys.OpenForWrite("d/a"));
  ASSERT_OK(w->Append(Iota(10)));
  ASSERT_OK(w->Append(Iota(5, 10)));
  ASSERT_OK(w->Sync());
  ASSERT_OK(w->Close());
  EXPECT_THAT(fsys.GetFile("d/a"), Pointee(Iota(15)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       fsys.OpenForRead("d/a"));
  EXPECT_EQ(r->Size(), 15u);
  std::vector<std::byte> buf(5);
  ASSERT_OK(r->ReadAt(8, buf));
  EXPECT_EQ(buf, Iota(5, 8));
}

TEST(MemFileTest, ReadPastEndIsCorruptionNamingSizes) {
  MemFileSystem fsys;
  fsys.SetFile("a", Iota(100));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       fsys.OpenForRead("a"));
  std::vector<std::byte> buf(50);
  EXPECT_THAT(
      r->ReadAt(60, buf),
      StatusIs(StatusCode::kCorruption,
               "truncated: wanted 50 bytes at offset 60, file has 100"));
  EXPECT_THAT(r->ReadAt(UINT64_MAX, buf),
              StatusIs(StatusCode::kCorruption, "truncated"));
}

TEST(MemFileTest, MissingIsNotFoundAndDirectoryIsInvalidArgument) {
  MemFileSystem fsys;
  fsys.SetFile("dir/a", Iota(1));
  EXPECT_THAT(fsys.OpenForRead("dir/b"),
              StatusIs(StatusCode::kNotFound, "dir/b"));
  EXPECT_THAT(fsys.OpenForRead("dir"),
              StatusIs(StatusCode::kInvalidArgument, "directory"));
  EXPECT_THAT(fsys.Remove("dir/b"), StatusIs(StatusCode::kNotFound, "dir/b"));
  EXPECT_THAT(fsys.Rename("dir/b", "dir/c"),
              StatusIs(StatusCode::kNotFound, "dir/b"));
  EXPECT_TRUE(fsys.Exists("dir"));
  EXPECT_TRUE(fsys.Exists("dir/a"));
  EXPECT_FALSE(fsys.Exists("dir/b"));
}

TEST(MemFileTest, ListDirNamesDirectChildrenOnce) {
  MemFileSystem fsys;
  fsys.SetFile("d/b", {});
  fsys.SetFile("d/a", {});
  fsys.SetFile("d/sub/x", {});
  fsys.SetFile("d/sub/y", {});
  fsys.SetFile("dd", {});
  fsys.SetFile("top", {});
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fsys.ListDir("d"));
  EXPECT_THAT(names, ElementsAre("a", "b", "sub"));
  ASSERT_OK_AND_ASSIGN(names, fsys.ListDir("d/"));
  EXPECT_THAT(names, ElementsAre("a", "b", "sub"));
  ASSERT_OK_AND_ASSIGN(names, fsys.ListDir("."));
  EXPECT_THAT(names, ElementsAre("d", "dd", "top"));
  ASSERT_OK_AND_ASSIGN(names, fsys.ListDir("nothing"));
  EXPECT_THAT(names, IsEmpty());
}

TEST(MemFileTest, WritePastLimitWritesWhatFitsThenFails) {
  MemFileSystem fsys;
  fsys.SetFaults({.fail_write_after_bytes = 12});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w, fsys.OpenForWrite("a"));
  ASSERT_OK(w->Append(Iota(10)));
  EXPECT_THAT(
      w->Append(Iota(5, 10)),
      StatusIs(StatusCode::kIoError,
               "write 'a' (2 of 5 bytes written): No space left on device"));
  EXPECT_THAT(fsys.GetFile("a"), Pointee(Iota(12)));
  EXPECT_THAT(w->Append(Iota(1)), StatusIs(StatusCode::kIoError, "No space"));
}

TEST(MemFileTest, FailSyncMakesSyncIoError) {
  MemFileSystem fsys;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w, fsys.OpenForWrite("a"));
  ASSERT_OK(w->Sync());
  fsys.SetFaults({.fail_sync = true});
  EXPECT_THAT(w->Sync(), StatusIs(StatusCode::kIoError, "fsync 'a'"));
}

TEST(MemFileTest, FailRenameLeavesBothPathsAsTheyWere) {
  MemFileSystem fsys;
  fsys.SetFile("new", Iota(3));
  fsys.SetFile("old", Iota(7));
  fsys.SetFaults({.fail_rename = true});
  EXPECT_THAT(fsys.Rename("new", "old"),
              StatusIs(StatusCode::kIoError, "rename 'new' to 'old'"));
  EXPECT_THAT(fsys.GetFile("new"), Pointee(Iota(3)));
  EXPECT_THAT(fsys.GetFile("old"), Pointee(Iota(7)));
}

TEST(MemFileTest, RenameReplacesTargetAndRemovesSource) {
  MemFileSystem fsys;
  fsys.SetFile("new", Iota(3));
  fsys.SetFile("old", Iota(7));
  ASSERT_OK(fsys.Rename("new", "old"));
  EXPECT_EQ(fsys.GetFile("new"), nullptr);
  EXPECT_THAT(fsys.GetFile("old"), Pointee(Iota(3)));
}

TEST(MemFileTest, OpenReaderKeepsItsBytesWhenPathIsRewritten) {
  MemFileSystem fsys;
  fsys.SetFile("a", Iota(100));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> r,
                       fsys.OpenForRead("a"));
  fsys.SetFile("a", Iota(3, 50));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<WritableFile> w,
                         fsys.OpenForWrite("a"));
    ASSERT_OK(w->Append(Iota(4, 90)));
  }
  ASSERT_OK(fsys.Remove("a"));
  EXPECT_EQ(r->Size(), 100u);
  std::vector<std::byte> buf(100);
  ASSERT_OK(r->ReadAt(0, buf));
  EXPECT_EQ(buf, Iota(100));
}

TEST(MemFileTest, WriterOutlivesFileSystem) {
  std::unique_ptr<WritableFile> w;
  {
    MemFileSystem fsys;
    ASSERT_OK_AND_ASSIGN(w, fsys.OpenForWrite("a"));
  }
  EXPECT_OK(w->Append(Iota(10)));
  EXPECT_OK(w->Close());
}

TEST(MemFileTest, ConcurrentReadersSeeIdenticalBytes) {
  MemFileSystem fsys;
  const std::vector<std::byte> data = Iota(1 << 16);
  fsys.SetFile("a", data);
  std::vector<int> same(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Result<std::unique_ptr<RandomAccessFile>> r = fsys.OpenForRead("a");
      if (!r.ok()) return;
      std::vector<std::byte> buf(data.size());
      bool all = true;
      for (int i = 0; i < 20; ++i) {
        all = all && (*r)->ReadAt(0, buf).ok() && buf == data;
        fsys.SetFile("other" + std::to_string(t), Iota(10));
      }
      same[t] = all;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(same, ::testing::Each(1));
}

TEST(MemFileTest, PositionedWritesLandAtTheirOffsetsAndTakeTheFaults) {
  MemFileSystem fsys;
  fsys.SetFile("d/shared", std::vector<std::byte>(8, std::byte{0xEE}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PositionedWritableFile> a,
                       fsys.OpenForPositionedWrite("d/shared"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PositionedWritableFile> b,
                       fsys.OpenForPositionedWrite("d/shared"));
  ASSERT_OK(b->WriteAt(12, Iota(4, 12)));
  ASSERT_OK(a->WriteAt(4, Iota(4, 4)));
  std::vector<std::byte> expected(16, std::byte{0});
  for (int i = 0; i < 4; ++i) expected[i] = std::byte{0xEE};
  for (int i = 4; i < 8; ++i) expected[i] = static_cast<std::byte>(i);
  for (int i = 12; i < 16; ++i) expected[i] = static_cast<std::byte>(i);
  EXPECT_THAT(fsys.GetFile("d/shared"), Pointee(expected));
  // A full disk past 18 bytes: what fits is written, then the write fails.
  fsys.SetFaults({.fail_write_after_bytes = 18, .fail_sync = true});
  EXPECT_THAT(a->WriteAt(16, Iota(4, 16)), StatusIs(StatusCode::kIoError, "No space left"));
  EXPECT_EQ(fsys.GetFile("d/shared")->size(), 18u);
  EXPECT_THAT(a->Sync(), StatusIs(StatusCode::kIoError, "fsync"));
  ASSERT_OK(a->Close());
  EXPECT_THAT(a->WriteAt(0, Iota(1)), StatusIs(StatusCode::kInvalidArgument, "already closed"));
  EXPECT_THAT(fsys.OpenForPositionedWrite("d/missing"), StatusIs(StatusCode::kNotFound, ""));
}

TEST(MemFileTest, DirectoriesAreImpliedByTheirFiles) {
  MemFileSystem fsys;
  ASSERT_OK(fsys.CreateDir("d/e"));
  fsys.SetFile("d/e/f", Iota(1));
  fsys.SetFile("d/g", Iota(1));
  fsys.SetFile("dx", Iota(1));
  EXPECT_THAT(fsys.CreateDir("d/g"), StatusIs(StatusCode::kInvalidArgument, "a file is there"));
  EXPECT_THAT(fsys.CreateDir("d/g/h"), StatusIs(StatusCode::kInvalidArgument, "a file is in the way"));
  ASSERT_OK(fsys.RemoveAll("d"));
  EXPECT_EQ(fsys.GetFile("d/e/f"), nullptr);
  EXPECT_EQ(fsys.GetFile("d/g"), nullptr);
  EXPECT_NE(fsys.GetFile("dx"), nullptr);  // not below d/
  EXPECT_THAT(fsys.RemoveAll("d"), StatusIs(StatusCode::kNotFound, ""));
}

}  // namespace
}  // namespace rckpt
