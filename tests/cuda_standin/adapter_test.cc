// rckpt's CUDA runtime (cuda/) over the stand-in driver: how it finds the
// driver, what "no GPU" and "unusable" mean, the two driver minimums, the
// caller's current context, and the faults a device can have. The stand-in
// itself is checked to catch the misuse it is there to catch.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "codec/codec.h"
#include "rckpt/io.h"
#include "driver.h"
#include "rckpt/runtime.h"
#include "runtime_fixture.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

constexpr int kNoBinaryForGpu = 209;
constexpr int kUnsupportedPtxVersion = 222;

class AdapterTest : public StandinRuntimeTest {};

TEST_F(AdapterTest, ABuildFindsTheDriverAtRunTime) {
  ASSERT_OK_AND_ASSIGN(int n, Runtime().DeviceCount());
  EXPECT_EQ(n, 2);
  EXPECT_EQ(Runtime().NoDeviceReason(), "");
  EXPECT_EQ(Runtime().name(), "cuda");
}

TEST_F(AdapterTest, NothingIsLoadedUntilADeviceIsNeeded) {
  (void)Runtime();  // made, not asked
  EXPECT_EQ(CudaStandinStats().retained_contexts, 0);
  auto missing = NewCudaRuntime({.driver_library = "/nonexistent/libcuda.so.1"});
  ASSERT_TRUE(missing.ok()) << "creating a runtime opens nothing";
}

TEST_F(AdapterTest, PathsThatTouchNoDeviceNeverInitialiseTheDriver) {
  MemFileSystem fs;
  Checkpoint host_only;
  ASSERT_OK(host_only.AddTensor("model", "w", *Tensor::Zeros(DType::kF32, {16})));
  ASSERT_OK(host_only.AddTensor("metrics", "m", *Tensor::Zeros(DType::kF32, {4}), Role::kHost));
  SaveOptions so;
  so.fs = &fs;
  so.runtime = &Runtime();
  ASSERT_OK(Save("/h.rckpt", host_only, so));
  LoadOptions o;
  o.fs = &fs;
  o.runtime = &Runtime();
  ASSERT_OK(Load("/h.rckpt", o).status());                    // as stored: all on cpu
  ASSERT_OK(PlanLoad("/h.rckpt", o).status());
  o.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK(Load("/h.rckpt", o).status());
  o.map_location = MapLocation();
  o.model_device = DeviceSpec::Of(Device::Cpu());
  ASSERT_OK(Load("/h.rckpt", o).status());
  o.sections = {"metrics"};
  o.model_device = DeviceSpec::Auto();  // no model-role tensor is read: nothing to decide
  ASSERT_OK(Load("/h.rckpt", o).status());
  EXPECT_EQ(CudaStandinStats().init_calls, 0) << "a process forked now can still use CUDA";
  o.sections.clear();
  ASSERT_OK_AND_ASSIGN(Checkpoint on_gpu, Load("/h.rckpt", o));
  EXPECT_EQ(on_gpu.FindTensor("w")->tensor.device(), Device::Cuda(0));
  EXPECT_EQ(CudaStandinStats().init_calls, 1) << "the first load that needs a device opens it";
}

TEST_F(AdapterTest, AMissingDriverLibraryMeansNoGpuWithTheReason) {
  ASSERT_OK_AND_ASSIGN(auto rt, NewCudaRuntime({.driver_library = "/nonexistent/libcuda.so.1"}));
  ASSERT_OK_AND_ASSIGN(int n, rt->DeviceCount());
  EXPECT_EQ(n, 0);
  EXPECT_THAT(rt->NoDeviceReason(), ::testing::HasSubstr("/nonexistent/libcuda.so.1 was not found"));
  EXPECT_THAT(rt->NoDeviceReason(), ::testing::HasSubstr("NVIDIA container runtime"));
}

TEST_F(AdapterTest, GpuDeviceFilesWithoutTheLibraryAreAnErrorNotNoGpu) {
  const std::filesystem::path dev = std::filesystem::path(testing::NewTempDir("adapter")) / "dev";
  std::filesystem::create_directories(dev);
  std::ofstream(dev / "nvidia0") << "";
  cuda::Driver driver("/nonexistent/libcuda.so.1", dev.string());
  const cuda::DriverState& s = driver.State();
  EXPECT_THAT(s.status, StatusIs(StatusCode::kDeviceUnavailable, "a GPU is present"));
  EXPECT_THAT(s.status.message(), ::testing::HasSubstr("nvidia0"));
  EXPECT_THAT(s.status.message(), ::testing::HasSubstr("LD_LIBRARY_PATH"));
}

TEST_F(AdapterTest, EmptyCudaVisibleDevicesMeansNoGpu) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  auto n = Runtime().DeviceCount();
  const std::string reason = Runtime().NoDeviceReason();
  unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0);
  EXPECT_THAT(reason, ::testing::HasSubstr("CUDA_VISIBLE_DEVICES='' hides every device"));
}

TEST_F(AdapterTest, ADriverReportingNoDeviceMeansNoGpu) {
  Configure({.devices = 0});
  ASSERT_OK_AND_ASSIGN(int n, Runtime().DeviceCount());
  EXPECT_EQ(n, 0);
  EXPECT_THAT(Runtime().NoDeviceReason(), ::testing::HasSubstr("reports no CUDA device"));
}

TEST_F(AdapterTest, ADriverBelowTheAdapterMinimumIsRefusedNamingBothVersions) {
  Configure({.driver_version = 11020});
  EXPECT_THAT(Runtime().DeviceCount(),
              StatusIs(StatusCode::kDeviceUnavailable, "supports CUDA 11.2"));
  EXPECT_THAT(Runtime().DeviceCount().status().message(),
              ::testing::HasSubstr("rckpt needs CUDA 11.4 or newer"));
  EXPECT_THAT(Runtime().Allocate(Device::Cuda(0), 16),
              StatusIs(StatusCode::kDeviceUnavailable, "supports CUDA 11.2"));
}

TEST_F(AdapterTest, ADriverAtTheAdapterMinimumWorks) {
  Configure({.driver_version = kMinCudaDriverVersion});
  ASSERT_OK_AND_ASSIGN(int n, Runtime().DeviceCount());
  EXPECT_EQ(n, 2);
}

TEST_F(AdapterTest, AFailingInitIsAnErrorNamingTheCauseAndTheFix) {
  Configure({.init_error = 999});
  EXPECT_THAT(Runtime().DeviceCount(),
              StatusIs(StatusCode::kDeviceUnavailable, "cannot be initialised (cuInit: CUDA_ERROR_UNKNOWN)"));
  Configure({.init_error = 803});
  EXPECT_THAT(Runtime().DeviceCount(), StatusIs(StatusCode::kDeviceUnavailable, "reboot"));
}

TEST_F(AdapterTest, BelowTheKernelMinimumShuffledDataIsUnshuffledOnTheHost) {
  Configure({.driver_version = 11080});
  std::string why;
  EXPECT_FALSE(Runtime().CanUnshuffle(Device::Cuda(0), &why));
  EXPECT_THAT(why, ::testing::HasSubstr("supports CUDA 11.8"));
  EXPECT_THAT(why, ::testing::HasSubstr("needs CUDA 12.0 (driver R525+)"));
  EXPECT_THAT(Runtime().UnshuffleAsync(Device::Cuda(0), Stream{}, nullptr, nullptr, 8, 2),
              StatusIs(StatusCode::kUnsupported, "R525"));
}

TEST_F(AdapterTest, AKernelImageThatDoesNotLoadIsNotFatal) {
  for (int error : {kNoBinaryForGpu, kUnsupportedPtxVersion}) {
    Configure({.kernel_load_error = error});
    std::string why;
    EXPECT_FALSE(Runtime().CanUnshuffle(Device::Cuda(0), &why));
    EXPECT_THAT(why, ::testing::HasSubstr(error == kNoBinaryForGpu
                                              ? "CUDA_ERROR_NO_BINARY_FOR_GPU"
                                              : "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
    ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(Device::Cuda(0), 64));
    Runtime().Free(Device::Cuda(0), p);
  }
}

TEST_F(AdapterTest, UnshuffleOnTheDeviceMatchesTheCpu) {
  const Device d = Device::Cuda(1);
  std::vector<std::byte> raw(4 * 3000 + 3);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::byte>(i * 7);
  std::vector<std::byte> shuffled(raw.size());
  ShuffleBytes(raw, shuffled, 4);
  ASSERT_TRUE(Runtime().CanUnshuffle(d, nullptr));
  ASSERT_OK_AND_ASSIGN(void* src, Runtime().Allocate(d, raw.size()));
  ASSERT_OK_AND_ASSIGN(void* dst, Runtime().Allocate(d, raw.size()));
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(d));
  ASSERT_OK(Runtime().CopyToDeviceAsync(d, s, src, shuffled.data(), raw.size()));
  ASSERT_OK(Runtime().UnshuffleAsync(d, s, dst, src, raw.size(), 4));
  ASSERT_OK(Runtime().Synchronize(d, s));
  EXPECT_EQ(std::memcmp(dst, raw.data(), raw.size()), 0);
  EXPECT_EQ(CudaStandinStats().launches, 1u);
  Runtime().DestroyStream(d, s);
  Runtime().Free(d, src);
  Runtime().Free(d, dst);
}

TEST_F(AdapterTest, EveryCallLeavesTheCallersCurrentContextAsItWas) {
  SetCudaStandinCurrentDevice(1);  // as torch.cuda.set_device(1) would
  ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
  EXPECT_EQ(current, 1);
  const Device d = Device::Cuda(0);
  auto check = [&](const char* after) {
    EXPECT_EQ(CudaStandinCurrentDevice(), 1) << after;
    EXPECT_EQ(CudaStandinContextDepth(), 1) << after;
  };
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(d, 256));
  check("Allocate");
  ASSERT_OK_AND_ASSIGN(void* pinned, Runtime().AllocatePinned(d, 256));
  check("AllocatePinned");
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(d));
  check("CreateStream");
  ASSERT_OK(Runtime().CopyToDeviceAsync(d, s, p, pinned, 256));
  check("CopyToDeviceAsync");
  ASSERT_OK(Runtime().CopyToHostAsync(d, s, pinned, p, 256));
  check("CopyToHostAsync");
  ASSERT_OK_AND_ASSIGN(Event e, Runtime().RecordEvent(d, s));
  check("RecordEvent");
  ASSERT_OK(Runtime().StreamWaitEvent(d, Stream{}, e));
  check("StreamWaitEvent");
  ASSERT_OK(Runtime().WaitEvent(e));
  check("WaitEvent");
  Runtime().DestroyEvent(e);
  check("DestroyEvent");
  ASSERT_OK(Runtime().Synchronize(d, s));
  check("Synchronize");
  EXPECT_TRUE(Runtime().CanUnshuffle(d, nullptr));
  check("CanUnshuffle");
  Runtime().DestroyStream(d, s);
  check("DestroyStream");
  Runtime().FreePinned(pinned);
  check("FreePinned");
  Runtime().Free(d, p);
  check("Free");
  SetCudaStandinCurrentDevice(-1);
}

TEST_F(AdapterTest, WithoutACurrentContextTheCurrentDeviceIsZero) {
  ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
  EXPECT_EQ(current, 0);
  EXPECT_EQ(CudaStandinContextDepth(), 0);
}

TEST_F(AdapterTest, OutOfMemoryAtTheFirstAllocationIsOutOfMemory) {
  Configure({.memory_bytes = 1 << 20});
  EXPECT_THAT(Runtime().Allocate(Device::Cuda(0), 2 << 20),
              StatusIs(StatusCode::kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"));
  Configure({.retain_error = 2});
  EXPECT_THAT(Runtime().Allocate(Device::Cuda(0), 16),
              StatusIs(StatusCode::kOutOfMemory, "cuDevicePrimaryCtxRetain(cuda:0)"));
}

TEST_F(AdapterTest, AStickyFaultFailsEveryLaterCallOnThatDevice) {
  Configure({.sticky_copy = 1});
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(d, 64));
  std::vector<std::byte> host(64);
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(d));
  ASSERT_OK(Runtime().CopyToDeviceAsync(d, s, p, host.data(), 64));
  EXPECT_THAT(Runtime().Synchronize(d, s),
              StatusIs(StatusCode::kDeviceError, "CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_THAT(Runtime().Allocate(d, 64), StatusIs(StatusCode::kDeviceError, "ILLEGAL_ADDRESS"));
  ASSERT_OK_AND_ASSIGN(void* other, Runtime().Allocate(Device::Cuda(1), 64));
  Runtime().Free(Device::Cuda(1), other);
  Runtime().DestroyStream(d, s);
  Runtime().Free(d, p);
}

TEST_F(AdapterTest, AStreamOfAnotherDeviceIsRefused) {
  ASSERT_OK_AND_ASSIGN(Stream s0, Runtime().CreateStream(Device::Cuda(0)));
  ASSERT_OK_AND_ASSIGN(void* p1, Runtime().Allocate(Device::Cuda(1), 64));
  std::vector<std::byte> host(64);
  EXPECT_THAT(Runtime().CopyToDeviceAsync(Device::Cuda(1), s0, p1, host.data(), 64),
              StatusIs(StatusCode::kDeviceError, "CUDA_ERROR_INVALID_HANDLE"));
  EXPECT_THAT(CudaStandinViolations(), ::testing::HasSubstr("a stream of cuda:0 used while cuda:1"));
  Runtime().DestroyStream(Device::Cuda(0), s0);
  Runtime().Free(Device::Cuda(1), p1);
  Configure({});  // clears the violation this test made on purpose
}

TEST_F(AdapterTest, TheStandinCatchesAStagingBufferReusedBeforeItsCopyRan) {
  Configure({.copy_delay_us = 20000});
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(d, 64));
  ASSERT_OK_AND_ASSIGN(void* pinned, Runtime().AllocatePinned(d, 64));
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(d));
  std::memset(pinned, 1, 64);
  ASSERT_OK(Runtime().CopyToDeviceAsync(d, s, p, pinned, 64));
  std::memset(pinned, 2, 64);  // too early: the copy has not run
  ASSERT_OK(Runtime().Synchronize(d, s));
  EXPECT_THAT(CudaStandinViolations(), ::testing::HasSubstr("reused too early"));
  Runtime().DestroyStream(d, s);
  Runtime().FreePinned(pinned);
  Runtime().Free(d, p);
  Configure({});
}

TEST_F(AdapterTest, TheStandinCountsWhatIsLeftLive) {
  const Device d = Device::Cuda(1);
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(d, 100));
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(d));
  RckptStandinStats st = CudaStandinStats();
  EXPECT_EQ(st.live_allocations[1], 1);
  EXPECT_EQ(st.live_bytes[1], 100u);
  EXPECT_EQ(st.live_streams, 1);
  EXPECT_EQ(st.retained_contexts, 1) << "only cuda:1's context was needed";
  Runtime().DestroyStream(d, s);
  Runtime().Free(d, p);
  runtime_.reset();
  st = CudaStandinStats();
  EXPECT_EQ(st.live_allocations[1], 0);
  EXPECT_EQ(st.live_streams, 0);
  EXPECT_EQ(st.retained_contexts, 0) << "the runtime releases what it retained";
}

}  // namespace
}  // namespace rckpt
