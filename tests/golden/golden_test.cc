// Golden files written by released versions must load forever with the same
// content; golden-error files must keep being rejected with their code.
#include <cctype>
#include <filesystem>
#include <random>

#include "format/format_test_util.h"
#include "golden/golden_checkpoints.h"
#include "rckpt/inspect.h"

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

// Files written before the binary layout hold the engine's textual state; it
// still restores the engine the file was saved from.
TEST(GoldenTest, LegacyTextualEngineStateRestoresTheEngine) {
  ASSERT_OK_AND_ASSIGN(
      Checkpoint back,
      testing::LoadAllToHost(PosixFileSystem(), kData + "/golden/v1.0-training-state.rckpt"));
  const RngRecord* record = back.FindRng("shuffle_engine");
  ASSERT_NE(record, nullptr);
  ASSERT_TRUE(!record->bytes.empty() && std::isdigit(static_cast<int>(record->bytes[0])));
  std::mt19937_64 restored;
  ASSERT_OK(RestoreEngine(record->bytes, &restored));
  std::mt19937_64 saved(12);
  EXPECT_EQ(restored, saved);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(restored(), saved()) << i;
}

TEST(GoldenTest, BinaryLayoutEngineStatesRestoreTheirEngines) {
  ASSERT_OK_AND_ASSIGN(
      Checkpoint back,
      testing::LoadAllToHost(PosixFileSystem(), kData + "/golden/v1.0-rng-binary-layout.rckpt"));
  std::mt19937 mt;
  ASSERT_OK(RestoreEngine(back.FindRng("mt19937")->bytes, &mt));
  std::mt19937 mt_saved = golden::GoldenMt19937();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(mt(), mt_saved()) << i;
  std::mt19937_64 mt64;
  ASSERT_OK(RestoreEngine(back.FindRng("mt19937_64")->bytes, &mt64));
  std::mt19937_64 mt64_saved = golden::GoldenMt19937_64();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(mt64(), mt64_saved()) << i;
  std::mt19937 reference;
  ASSERT_OK(RestoreEngine(back.FindRng("mt19937.reference")->bytes, &reference));
  EXPECT_EQ(reference, std::mt19937(5489));
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
