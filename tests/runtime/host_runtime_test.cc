#include <cstring>

#include "rckpt/runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

TEST(HostRuntimeTest, HasNoDevicesAndRefusesDeviceWork) {
  DeviceRuntime& rt = HostRuntime();
  EXPECT_EQ(rt.name(), "host");
  EXPECT_EQ(rt.DeviceCount().value_or(-1), 0);
  EXPECT_THAT(
      rt.Allocate(Device::Cuda(0), 8),
      StatusIs(StatusCode::kDeviceUnavailable, "device cuda:0 does not exist"));
  EXPECT_THAT(rt.CreateStream(Device::Cuda(0)),
              StatusIs(StatusCode::kDeviceUnavailable, "cuda:0"));
}

TEST(HostRuntimeTest, PinnedMemoryIsUsableHostMemory) {
  DeviceRuntime& rt = HostRuntime();
  ASSERT_OK_AND_ASSIGN(void* p, rt.AllocatePinned(Device::Cpu(), 1 << 20));
  std::memset(p, 0xab, 1 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  rt.FreePinned(p);
}

TEST(RuntimeSelectionTest, CudaRuntimeIsUnsupportedOrCountsWithoutCrashing) {
  Result<DeviceRuntime*> cuda = CudaRuntime();
  if (!cuda.ok()) {
    EXPECT_THAT(cuda, StatusIs(StatusCode::kUnsupported, "without its CUDA runtime"));
    EXPECT_EQ(DefaultRuntime().name(), "host");
    return;
  }
  EXPECT_EQ((*cuda)->name(), "cuda");
  EXPECT_EQ(DefaultRuntime().name(), "cuda") << "chosen without asking the driver";
  ASSERT_OK_AND_ASSIGN(const int n, (*cuda)->DeviceCount());
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_THAT((*cuda)->Allocate(Device::Cuda(0), 8),
                StatusIs(StatusCode::kDeviceUnavailable, "cuda:0 does not exist"));
  }
}

}  // namespace
}  // namespace rckpt
