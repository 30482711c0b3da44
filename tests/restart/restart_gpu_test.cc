// The restart workflow on a real GPU (ctest label "gpu"): the demo's state
// lives on cuda:0 through the CUDA runtime. Skips without a CUDA device.
#include "restart_fixture.h"

namespace rckpt::testing {
namespace {

const std::vector<std::string> kOnCuda0 = {"--device", "cuda:0"};

class GpuRestartTest : public RestartTest {
 protected:
  void SetUp() override {
    if (RealDeviceCount() == 0) RCKPT_SKIP_WITHOUT_GPU("no CUDA device on this machine");
    RestartTest::SetUp();
  }
};

TEST_F(GpuRestartTest, Cuda0RunResumedAsStoredEndsIdentical) {
  std::string baseline = Baseline(kOnCuda0);
  std::string ckpt = CrashAfter(18, kOnCuda0);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(ckpt));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(0));
  ExpectIdentical(baseline, Resume(ckpt, {}));
}

TEST_F(GpuRestartTest, Cuda0RunEndsIdenticalUnderEveryPlacement) {
  std::string baseline = Baseline(kOnCuda0);
  std::string ckpt = CrashAfter(18, kOnCuda0);
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"--model-device", "auto"},
        std::vector<std::string>{"--model-device", "cpu"},
        std::vector<std::string>{"--map-location", "cpu"},
        std::vector<std::string>{"--map-location", "cuda:0"},
        std::vector<std::string>{"--map-location", "cuda:0=cpu"}}) {
    SCOPED_TRACE(options[0] + " " + options[1]);
    ExpectIdentical(baseline, Resume(ckpt, options), /*ignore_devices=*/true);
  }
}

TEST_F(GpuRestartTest, Cuda0RunResumedOnHostAndBackEndsIdentical) {
  std::string baseline = Baseline(kOnCuda0);
  std::string on_gpu = CrashAfter(10, kOnCuda0);
  std::string on_host = ResumeCrashing(on_gpu, {"--map-location", "cpu"}, 23);
  ASSERT_OK_AND_ASSIGN(auto host_origins, OriginDevices(on_host));
  EXPECT_EQ(host_origins["model.fc1.weight"], Device::Cpu());
  std::string final_path = Resume(on_host, {"--model-device", "cuda:0"});
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/true);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(final_path));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(0));
}

TEST_F(GpuRestartTest, EmulatedCuda1CheckpointResumesOnTheRealGpu) {
  const std::vector<std::string> on_cuda1 = {"--emulate-devices", "2", "--device", "cuda:1"};
  std::string baseline = Baseline(on_cuda1);
  std::string ckpt = CrashAfter(18, on_cuda1);
  std::string final_path = Resume(ckpt, {"--map-location", "cuda:1=cuda:0"});
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/true);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(final_path));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(0));
  EXPECT_EQ(origins["database.x"], Device::Cuda(0));
}

}  // namespace
}  // namespace rckpt::testing
