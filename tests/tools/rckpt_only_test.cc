// ExplainOtherFormat: what verify, plan and load say of a file rckpt reads
// but that is not an .rckpt file.
#include "rckpt_only.h"

#include "rckpt/io.h"
#include "test_util.h"

namespace rckpt::cli {
namespace {

const std::string kData = RCKPT_TEST_DATA_DIR;

// What the rckpt reader says of `path` (as verify, plan and load get it).
Status ReadAsRckpt(const std::string& path) { return PlanLoad(path).status(); }

TEST(ExplainOtherFormatTest, APyTorchFileIsUnsupportedNamingWhatReadsIt) {
  const std::string path = kData + "/pytorch/nested.pt";
  Status s = ExplainOtherFormat("verify", path, ReadAsRckpt(path));
  EXPECT_THAT(s, StatusIs(StatusCode::kUnsupported,
                          "'" + path + "' is a PyTorch zip archive (torch.save), not an .rckpt "
                          "file: rckpt verify reads .rckpt files only"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("rckpt.load(\"" + path + "\")"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("'rckpt convert " + path + " OUT.rckpt'"));
}

TEST(ExplainOtherFormatTest, ASafetensorsFileIsUnsupported) {
  const std::string path = kData + "/safetensors/model.safetensors";
  EXPECT_THAT(ExplainOtherFormat("load", path, ReadAsRckpt(path)),
              StatusIs(StatusCode::kUnsupported, "is a safetensors file, not an .rckpt file: "
                                                 "rckpt load reads .rckpt files only"));
}

TEST(ExplainOtherFormatTest, ADcpDirectoryIsUnsupported) {
  const std::string path = kData + "/dcp/simple";
  Status read = ReadAsRckpt(path);
  ASSERT_EQ(read.code(), StatusCode::kInvalidArgument) << read.ToString();
  EXPECT_THAT(ExplainOtherFormat("plan", path, read),
              StatusIs(StatusCode::kUnsupported,
                       "is a torch.distributed.checkpoint (DCP) directory, not an .rckpt file"));
}

TEST(ExplainOtherFormatTest, ALegacyTorchFileGetsHowToResaveIt) {
  const std::string path = kData + "/pytorch/legacy.pt";
  EXPECT_THAT(ExplainOtherFormat("verify", path, ReadAsRckpt(path)),
              StatusIs(StatusCode::kUnsupported, "pre-1.6 PyTorch legacy"));
}

TEST(ExplainOtherFormatTest, OtherErrorsAreKept) {
  const std::string damaged = kData + "/golden-errors/chunk-bitflip.corruption.rckpt";
  const Status corrupt = Status::Corruption("'" + damaged + "': checksum mismatch");
  EXPECT_EQ(ExplainOtherFormat("verify", damaged, corrupt).ToString(), corrupt.ToString());
  // Options are refused before the file is looked at, whatever it is.
  const Status options = Status::InvalidArgument("map_location and model_device");
  EXPECT_EQ(ExplainOtherFormat("plan", kData + "/pytorch/nested.pt", options).ToString(),
            options.ToString());
  // A directory that is not a DCP checkpoint keeps the reader's error.
  const std::string dir = kData + "/golden";
  const Status read = ReadAsRckpt(dir);
  EXPECT_EQ(ExplainOtherFormat("verify", dir, read).ToString(), read.ToString());
  const Status missing = ReadAsRckpt(kData + "/absent.pt");
  EXPECT_EQ(ExplainOtherFormat("load", kData + "/absent.pt", missing).ToString(),
            missing.ToString());
}

}  // namespace
}  // namespace rckpt::cli
