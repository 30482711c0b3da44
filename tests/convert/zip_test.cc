#include "convert/zip.h"

#include "convert/bytes.h"
#include "convert_test_util.h"
#include "test_util.h"

namespace rckpt::convert {
namespace {

using ::rckpt::testing::Fixture;
using ::rckpt::testing::ReadBytes;
using ::rckpt::testing::StringFile;

std::string Archive(uint32_t alignment,
                    const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out;
  StringFile f(&out);
  ZipWriter z(&f, alignment);
  for (const auto& [n, d] : entries) EXPECT_OK(z.Add(n, AsBytes(d)));
  EXPECT_OK(z.Finish());
  return out;
}

Result<ZipDirectory> Read(const std::string& bytes) {
  return ReadZipDirectoryFromBytes(AsBytes(bytes));
}

TEST(ZipTest, Crc32MatchesKnownValue) {
  EXPECT_EQ(Crc32(AsBytes("123456789")), 0xcbf43926u);
  EXPECT_EQ(Crc32(AsBytes("")), 0u);
}

TEST(ZipTest, RoundTripsEntriesWithAlignedData) {
  std::string zip = Archive(64, {{"a/data.pkl", "hello"}, {"a/data/0", std::string(100, 'x')},
                                 {"a/empty", ""}});
  ASSERT_OK_AND_ASSIGN(ZipDirectory dir, Read(zip));
  ASSERT_EQ(dir.entries.size(), 3u);
  for (const ZipEntry& e : dir.entries) {
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;
    EXPECT_EQ(e.method, 0);
  }
  const ZipEntry* d = dir.Find("a/data/0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->size, 100u);
  EXPECT_EQ(zip.substr(d->data_offset, 100), std::string(100, 'x'));
  EXPECT_EQ(d->crc32, Crc32(AsBytes(std::string(100, 'x'))));
  EXPECT_EQ(dir.Find("missing"), nullptr);
}

TEST(ZipTest, HonoursLargerAlignment) {
  std::string zip = Archive(4096, {{"a/x", "1"}, {"a/y", "22"}});
  ASSERT_OK_AND_ASSIGN(ZipDirectory dir, Read(zip));
  for (const ZipEntry& e : dir.entries) EXPECT_EQ(e.data_offset % 4096, 0u);
}

TEST(ZipTest, WritesZip64EndRecordsForManyEntries) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 0x10000; ++i) entries.emplace_back("a/" + std::to_string(i), "");
  std::string zip = Archive(1, entries);
  ASSERT_OK_AND_ASSIGN(ZipDirectory dir, Read(zip));
  EXPECT_EQ(dir.entries.size(), 0x10000u);
  EXPECT_NE(zip.find("PK\x06\x06"), std::string::npos);  // zip64 end record
}

TEST(ZipTest, ReadsDataDescriptorsAndZip64ExtrasFromPythonZipfile) {
  auto bytes = ReadBytes(Fixture("pytorch/rezipped_zip64.pt"));
  ASSERT_FALSE(bytes.empty());
  ASSERT_OK_AND_ASSIGN(ZipDirectory dir, ReadZipDirectoryFromBytes(bytes));
  const ZipEntry* pkl = dir.Find("some folder/data.pkl");
  ASSERT_NE(pkl, nullptr);
  EXPECT_EQ(static_cast<uint8_t>(bytes[pkl->data_offset]), 0x80);  // PROTO
}

TEST(ZipTest, ListsDeflatedEntriesWithTheirMethod) {
  ASSERT_OK_AND_ASSIGN(ZipDirectory dir,
                       ReadZipDirectoryFromBytes(ReadBytes(Fixture("pytorch/rezipped_deflate.pt"))));
  ASSERT_FALSE(dir.entries.empty());
  EXPECT_EQ(dir.entries[0].method, 8);
}

TEST(ZipTest, RejectsFileWithoutEndRecord) {
  EXPECT_THAT(Read("PK\x03\x04 not really a zip file at all"),
              StatusIs(StatusCode::kCorruption, "no end-of-central-directory"));
  EXPECT_THAT(Read("PK"), StatusIs(StatusCode::kCorruption, "too small"));
}

TEST(ZipTest, RejectsCentralDirectoryPastTheEnd) {
  std::string zip = Archive(64, {{"a/x", "data"}});
  size_t eocd = zip.rfind("PK\x05\x06");
  zip[eocd + 16] = '\x7f';  // central directory offset far away
  EXPECT_THAT(Read(zip), StatusIs(StatusCode::kCorruption, "central directory"));
}

TEST(ZipTest, RejectsEntryDataOverlappingTheCentralDirectory) {
  std::string zip = Archive(64, {{"a/x", "data"}});
  size_t cd = zip.find("PK\x01\x02");
  zip[cd + 20] = zip[cd + 24] = '\x40';  // sizes 64: past the directory start
  EXPECT_THAT(Read(zip), StatusIs(StatusCode::kCorruption, "passes the start of the central"));
}

TEST(ZipTest, RejectsDuplicateNames) {
  std::string zip = Archive(64, {{"a/x", "1"}, {"a/x", "2"}});
  EXPECT_THAT(Read(zip), StatusIs(StatusCode::kCorruption, "duplicate"));
}

TEST(ZipTest, RejectsLocalHeaderNamingAnotherEntry) {
  std::string zip = Archive(64, {{"a/x", "1"}});
  zip[30 + 2] = 'y';  // local name a/x -> a/y
  EXPECT_THAT(Read(zip), StatusIs(StatusCode::kCorruption, "local header"));
}

TEST(ZipTest, RejectsEncryptedEntries) {
  std::string zip = Archive(64, {{"a/x", "1"}});
  size_t cd = zip.find("PK\x01\x02");
  zip[cd + 8] = 1;
  EXPECT_THAT(Read(zip), StatusIs(StatusCode::kUnsupported, "encrypted"));
}

TEST(ZipTest, RejectsEntryCountBeyondLimit) {
  std::string zip = Archive(64, {{"a/x", "1"}, {"a/y", "2"}});
  ZipLimits limits;
  limits.max_entries = 1;
  EXPECT_THAT(ReadZipDirectoryFromBytes(AsBytes(zip), limits),
              StatusIs(StatusCode::kCorruption, "exceed the limit"));
}

TEST(ZipTest, SurvivesEveryTruncation) {
  std::string zip = Archive(64, {{"a/data.pkl", "hello"}, {"a/data/0", "xyz"}});
  for (size_t n = 0; n < zip.size(); ++n) {
    auto r = Read(zip.substr(0, n));
    EXPECT_FALSE(r.ok()) << n;
  }
}

}  // namespace
}  // namespace rckpt::convert
