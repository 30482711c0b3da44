// The stand-in is no kinder than a driver (standin_control.h): frees do not
// wait, stream flags order streams as a driver does, a failed copy ends its
// context, pageable copies are told from pinned ones, and primary context
// retains are counted per device. Each is what a GPU would show and a
// kinder stand-in would hide.
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "driver_api.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime_fixture.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

using cuda::CUresult;
using cuda::CUstream;

const Device kCuda0 = Device::Cuda(0);
const Device kCuda1 = Device::Cuda(1);

// Driver entry points of the stand-in, for what rckpt's runtime never does
// (a blocking stream).
struct Raw {
  CUresult (*stream_create)(CUstream*, unsigned);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*stream_query)(CUstream);
  CUresult (*htod)(cuda::CUdeviceptr, const void*, size_t, CUstream);
};

Raw RawDriver() {
  void* h = dlopen(CudaStandinPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr);
  Raw r;
  r.stream_create = reinterpret_cast<decltype(r.stream_create)>(dlsym(h, "cuStreamCreate"));
  r.stream_destroy = reinterpret_cast<decltype(r.stream_destroy)>(dlsym(h, "cuStreamDestroy_v2"));
  r.stream_query = reinterpret_cast<decltype(r.stream_query)>(dlsym(h, "cuStreamQuery"));
  r.htod = reinterpret_cast<decltype(r.htod)>(dlsym(h, "cuMemcpyHtoDAsync_v2"));
  return r;
}

// Polls `done` for up to 120 s (a loaded machine is slow, never this slow).
template <typename Done>
bool Eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

class StandinTest : public StandinRuntimeTest {};

TEST_F(StandinTest, CopiesFromPageableMemoryAreCountedApartFromPinnedOnes) {
  ASSERT_OK_AND_ASSIGN(void* dev, Runtime().Allocate(kCuda0, 4096));
  ASSERT_OK_AND_ASSIGN(void* pinned, Runtime().AllocatePinned(kCuda0, 4096));
  std::vector<std::byte> pageable(4096);
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(kCuda0));
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, s, dev, pinned, 4096));
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, s, dev, static_cast<std::byte*>(pinned) + 16, 64));
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, s, dev, pageable.data(), 4096));
  ASSERT_OK(Runtime().CopyToHostAsync(kCuda0, s, pageable.data(), dev, 4096));
  ASSERT_OK(Runtime().Synchronize(kCuda0, s));
  RckptStandinStats st = CudaStandinStats();
  EXPECT_EQ(st.htod_pinned, 2u);
  EXPECT_EQ(st.htod_pageable, 1u);
  EXPECT_EQ(st.dtoh_pinned, 0u);
  EXPECT_EQ(st.dtoh_pageable, 1u);
  Runtime().DestroyStream(kCuda0, s);
  Runtime().FreePinned(pinned);
  Runtime().Free(kCuda0, dev);
}

// A load stages through the pool's pinned ring: not one pageable copy,
// until the pool's cap leaves it ordinary host memory, which is counted.
TEST_F(StandinTest, ADeviceLoadCopiesFromPinnedMemoryOnlyWithinThePinnedCap) {
  MemFileSystem fs;
  std::vector<float> values(100000, 1.5f);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w",
                         Tensor::Borrow({values.data(), DType::kF32, {100000}, Device::Cpu()})));
  ASSERT_OK(Save("/a.rckpt", ck, SaveOptions{.chunk_bytes = 64 << 10, .fs = &fs}));
  for (const uint64_t cap : {kDefaultPinnedPoolBytes, uint64_t{64} << 10}) {
    Configure({});
    auto rt = NewCudaRuntime({.driver_library = CudaStandinPath(), .pinned_pool_bytes = cap});
    ASSERT_TRUE(rt.ok());
    LoadOptions o;
    o.fs = &fs;
    o.runtime = rt->get();
    o.map_location = MapLocation::To(kCuda0);
    {
      ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/a.rckpt", o));
    }
    const RckptStandinStats st = CudaStandinStats();
    if (cap == kDefaultPinnedPoolBytes) {
      EXPECT_GT(st.htod_pinned, 0u);
      EXPECT_EQ(st.htod_pageable, 0u);
    } else {
      EXPECT_GT(st.htod_pageable, 0u) << "past the cap the ring is ordinary memory";
      EXPECT_GT((*rt)->PoolStats().unpinned_leases, 0u);
    }
    (*rt)->ReleasePool();
  }
}

TEST_F(StandinTest, FreeingMemoryAQueuedCopyStillUsesIsAViolationAndDoesNotWait) {
  ASSERT_OK_AND_ASSIGN(void* dev, Runtime().Allocate(kCuda0, 4096));
  ASSERT_OK_AND_ASSIGN(void* pinned, Runtime().AllocatePinned(kCuda0, 4096));
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(kCuda0));
  void* gate = HoldCudaStandinStream(s.handle, 0);
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, s, dev, pinned, 4096));
  // A driver need not wait for the stream: neither does the stand-in.
  auto freed = std::async(std::launch::async, [&] {
    Runtime().FreePinned(pinned);
    Runtime().Free(kCuda0, dev);
  });
  const bool returned = freed.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  ReleaseCudaStandinStream(gate);
  freed.get();
  EXPECT_TRUE(returned) << "cuMemFree or cuMemFreeHost waited for a held stream";
  const std::string violations = CudaStandinViolations();
  EXPECT_THAT(violations, ::testing::HasSubstr("cuMemFreeHost of 4096 bytes of pinned memory "
                                               "that a queued copy still uses"));
  EXPECT_THAT(violations, ::testing::HasSubstr("cuMemFree of 4096 bytes of cuda:0 that a queued "
                                               "copy still uses"));
  ASSERT_OK(Runtime().Synchronize(kCuda0, s));  // the copy ran, on memory kept for it
  Runtime().DestroyStream(kCuda0, s);
  EXPECT_EQ(CudaStandinStats().live_pinned, 0);
  Configure({});  // clears the violations this test made on purpose
}

// Streams made without CU_STREAM_NON_BLOCKING wait for the legacy default
// stream (torch's default current stream); rckpt's never do.
TEST_F(StandinTest, OnlyABlockingStreamWaitsForTheLegacyDefaultStream) {
  ASSERT_OK_AND_ASSIGN(void* dev, Runtime().Allocate(kCuda0, 64));
  ASSERT_OK_AND_ASSIGN(Stream ours, Runtime().CreateStream(kCuda0));
  std::vector<std::byte> host(64);
  const Raw raw = RawDriver();
  SetCudaStandinCurrentDevice(0);  // for the raw calls; rckpt's push their own
  CUstream blocking = nullptr;
  ASSERT_EQ(raw.stream_create(&blocking, 0), cuda::kSuccess);
  void* gate = HoldCudaStandinStream(nullptr, 0);  // the legacy stream is busy
  ASSERT_EQ(raw.htod(reinterpret_cast<cuda::CUdeviceptr>(dev), host.data(), 64, blocking),
            cuda::kSuccess);
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, ours, dev, host.data(), 64));
  // Queued then: the gate, the blocking stream's copy and ours.
  EXPECT_TRUE(Eventually([] { return CudaStandinStats().pending_ops <= 2; }))
      << "a non-blocking stream waited for the legacy stream";
  EXPECT_EQ(raw.stream_query(blocking), cuda::kErrorNotReady)
      << "a blocking stream ran past the busy legacy stream";
  ReleaseCudaStandinStream(gate);
  EXPECT_TRUE(Eventually([&] { return raw.stream_query(blocking) == cuda::kSuccess; }));
  ASSERT_EQ(raw.stream_destroy(blocking), cuda::kSuccess);
  SetCudaStandinCurrentDevice(-1);
  ASSERT_OK(Runtime().Synchronize(kCuda0, ours));
  Runtime().DestroyStream(kCuda0, ours);
  Runtime().Free(kCuda0, dev);
}

TEST_F(StandinTest, AFailedCopyEndsItsContextUntilItsLastRetainIsReleased) {
  Configure({.fail_copy = 1});
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(kCuda0, 64));
  std::vector<std::byte> host(64);
  ASSERT_OK_AND_ASSIGN(Stream s, Runtime().CreateStream(kCuda0));
  ASSERT_OK(Runtime().CopyToDeviceAsync(kCuda0, s, p, host.data(), 64));
  EXPECT_THAT(Runtime().Synchronize(kCuda0, s),
              StatusIs(StatusCode::kDeviceError, "CUDA_ERROR_LAUNCH_FAILED"));
  // Every later call in that context fails the same way, on any stream.
  EXPECT_THAT(Runtime().Allocate(kCuda0, 64), StatusIs(StatusCode::kDeviceError, "LAUNCH_FAILED"));
  ASSERT_OK_AND_ASSIGN(Stream other, Runtime().CreateStream(kCuda1));
  Runtime().DestroyStream(kCuda1, other);
  EXPECT_THAT(Runtime().CreateStream(kCuda0), StatusIs(StatusCode::kDeviceError, "LAUNCH_FAILED"));
  EXPECT_TRUE(Runtime().DeviceSettled(kCuda1)) << "cuda:1 is unharmed";
  EXPECT_TRUE(Runtime().DeviceSettled(kCuda0)) << "a dead context runs nothing more";
  Runtime().DestroyStream(kCuda0, s);
  Runtime().Free(kCuda0, p);
  runtime_.reset();  // its last retain: the context is destroyed
  EXPECT_EQ(CudaStandinStats().live_retains[0], 0);
  ASSERT_OK_AND_ASSIGN(void* again, Runtime().Allocate(kCuda0, 64));
  Runtime().Free(kCuda0, again);
}

TEST_F(StandinTest, PrimaryContextRetainsAreCountedPerDevice) {
  Configure({.devices = 4});
  ASSERT_OK_AND_ASSIGN(void* p, Runtime().Allocate(Device::Cuda(2), 64));
  RckptStandinStats st = CudaStandinStats();
  EXPECT_EQ(st.live_retains[0], 0);
  EXPECT_EQ(st.live_retains[2], 1) << "only the device used is retained";
  EXPECT_EQ(st.live_retains[3], 0);
  Runtime().Free(Device::Cuda(2), p);
  runtime_.reset();
  st = CudaStandinStats();
  for (int d = 0; d < 4; ++d) EXPECT_EQ(st.live_retains[d], 0) << "cuda:" << d;
}

}  // namespace
}  // namespace rckpt
