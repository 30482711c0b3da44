// Golden files written by released versions must load forever with the same
// content; golden-error files must keep being rejected with their code.
#include <filesystem>

#include "format/format_test_util.h"
#include "golden/golden_checkpoints.h"
#include "rckpt/tools.h"

namespace rckpt {
namespace {

namespace fs = std::filesystem;
const std::string kData = RCKPT_TEST_DATA_DIR;

TEST(GoldenTest, EveryGoldenFileLoadsWithItsContent) {
  auto cases = golden::GoldenCases();
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    std::string path = kData + "/golden/" + c.file;
    ASSERT_TRUE(fs::exists(path)) << "missing golden file";
    ASSERT_OK(VerifyRckpt(path));
    ASSERT_OK_AND_ASSIGN(Checkpoint back, testing::LoadAllToHost(PosixFileSystem(), path));
    testing::ExpectSameContent(c.Expected(), back);
  }
}

TEST(GoldenTest, EveryGoldenFileIsKnown) {
  // A file added to golden/ without its builder would test nothing.
  std::set<std::string> known;
  for (const auto& c : golden::GoldenCases()) known.insert(c.file);
  for (const auto& e : fs::directory_iterator(kData + "/golden")) {
    EXPECT_TRUE(known.count(e.path().filename().string())) << e.path();
  }
}

TEST(GoldenTest, GoldenErrorFilesAreRejectedWithTheirCode) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kData + "/golden-errors")) {
    std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    // <what>.<code>.rckpt
    std::string stem = name.substr(0, name.size() - 6);
    std::string code = stem.substr(stem.rfind('.') + 1);
    Status s = VerifyRckpt(e.path().string());
    ASSERT_FALSE(s.ok());
    std::string got(StatusCodeName(s.code()));
    std::transform(got.begin(), got.end(), got.begin(), ::tolower);
    EXPECT_EQ(got, code) << s.ToString();
    ++n;
  }
  EXPECT_GE(n, 7);
}

}  // namespace
}  // namespace rckpt
