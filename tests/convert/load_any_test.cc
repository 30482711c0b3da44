// LoadAny: one load of any format, with rckpt::Load's options and rules.
#include <stdlib.h>

#include <filesystem>
#include <optional>

#include "convert_test_util.h"
#include "rckpt/convert.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

using ::rckpt::testing::Fixture;

// TMPDIR pointed at a directory of its own, so that the private copies a
// load makes there can be counted.
class LoadAnyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = ::getenv("TMPDIR");
    if (old != nullptr) old_tmpdir_ = old;
    tmp_ = testing::NewTempDir("load_any");
    ::setenv("TMPDIR", tmp_.c_str(), 1);
  }
  void TearDown() override {
    if (old_tmpdir_) {
      ::setenv("TMPDIR", old_tmpdir_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  size_t Entries() const {
    return std::distance(std::filesystem::directory_iterator(tmp_),
                         std::filesystem::directory_iterator());
  }

  std::string tmp_;
  std::optional<std::string> old_tmpdir_;
};

// A .pt loads with map_location applied, as an .rckpt would; the private
// copy is gone when LoadAny returns, and the report says what was imported.
TEST_F(LoadAnyTest, LoadsAPtWithItsPlacementAndLeavesNoCopy) {
  std::unique_ptr<DeviceRuntime> rt = NewEmulatedRuntime(2);
  LoadOptions o;
  o.runtime = rt.get();
  o.map_location = *MapLocation::Parse("cuda:1=cuda:0,cuda:0=cpu");
  ImportReport report;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, LoadAny(Fixture("pytorch/cuda_tagged.pt"), o, {}, &report));
  EXPECT_EQ(report.format, "pytorch");
  bool saw_cuda1 = false;
  for (const TensorEntry& t : ck.tensors()) {
    if (t.Origin() == Device::Cuda(1)) {
      saw_cuda1 = true;
      EXPECT_EQ(t.tensor.device(), Device::Cuda(0)) << t.name;
    } else {
      EXPECT_EQ(t.tensor.device(), Device::Cpu()) << t.name;
    }
  }
  EXPECT_TRUE(saw_cuda1);
  EXPECT_EQ(Entries(), 0u);
}

// The options are checked before anything is read: a bad one is refused
// for a file that is not there, and no copy is made.
TEST_F(LoadAnyTest, ChecksTheOptionsBeforeReading) {
  LoadOptions o;
  o.map_location = MapLocation::To(Device::Cpu());
  o.model_device = DeviceSpec::Of(Device::Cpu());
  EXPECT_THAT(LoadAny(tmp_ + "/absent.pt", o).status(),
              StatusIs(StatusCode::kInvalidArgument, "map_location"));
  EXPECT_EQ(Entries(), 0u);
}

// Errors name the file given, never the private copy.
TEST_F(LoadAnyTest, ErrorsNameTheFileNotTheCopy) {
  LoadOptions o;
  o.sections = {"no_such_section"};
  const std::string pt = Fixture("pytorch/cuda_tagged.pt");
  Result<Checkpoint> r = LoadAny(pt, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("rckpt-import-"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(Entries(), 0u);
  ImportReport report;
  LoadOptions to_host;
  to_host.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK(LoadAny(std::string(RCKPT_TEST_DATA_DIR) + "/golden/v1.0-training-state.rckpt",
                    to_host, {}, &report)
                .status());
  EXPECT_EQ(report.format, "rckpt");
}

}  // namespace
}  // namespace rckpt
