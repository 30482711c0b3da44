#include "runtime/emulated_runtime.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "codec/codec.h"
#include "test_util.h"

namespace rckpt {
namespace {

std::unique_ptr<EmulatedRuntime> Emulated(int devices, int fail_after = 0,
                                          uint64_t memory = UINT64_MAX) {
  EmulatedRuntimeOptions o;
  o.device_count = devices;
  o.fail_after_copies = fail_after;
  o.device_memory_bytes = memory;
  return NewEmulatedRuntimeForTesting(o);
}

TEST(EmulatedRuntimeTest, TracksAllocationsPerDevice) {
  auto rt = Emulated(2);
  EXPECT_EQ(rt->DeviceCount().value_or(-1), 2);
  EXPECT_EQ(rt->name(), "emulated(2)");
  ASSERT_OK_AND_ASSIGN(void* a, rt->Allocate(Device::Cuda(0), 100));
  ASSERT_OK_AND_ASSIGN(void* b, rt->Allocate(Device::Cuda(1), 50));
  EXPECT_EQ(rt->DeviceOf(a), 0);
  EXPECT_EQ(rt->DeviceOf(static_cast<char*>(b) + 49), 1);
  EXPECT_EQ(rt->LiveAllocations(0), 1);
  EXPECT_EQ(rt->LiveBytes(1), 50u);
  rt->Free(Device::Cuda(0), a);
  rt->Free(Device::Cuda(1), b);
  EXPECT_TRUE(rt->NothingLive());
}

TEST(EmulatedRuntimeTest, FreeOnTheWrongDeviceIsCountedNotDone) {
  auto rt = Emulated(2);
  ASSERT_OK_AND_ASSIGN(void* a, rt->Allocate(Device::Cuda(0), 8));
  rt->Free(Device::Cuda(1), a);
  EXPECT_EQ(rt->BadFrees(), 1);
  EXPECT_EQ(rt->LiveAllocations(0), 1);
  rt->Free(Device::Cuda(0), a);
  EXPECT_EQ(rt->LiveAllocations(0), 0);
}

TEST(EmulatedRuntimeTest, MissingDeviceIsUnavailableAndCpuIsNotADevice) {
  auto rt = Emulated(1);
  EXPECT_THAT(rt->Allocate(Device::Cuda(1), 8),
              StatusIs(StatusCode::kDeviceUnavailable, "cuda:1"));
  EXPECT_THAT(rt->Allocate(Device::Cpu(), 8),
              StatusIs(StatusCode::kInvalidArgument, "not a CUDA device"));
  EXPECT_THAT(rt->CreateStream(Device::Cuda(3)),
              StatusIs(StatusCode::kDeviceUnavailable, "cuda:3"));
}

TEST(EmulatedRuntimeTest, AllocationPastDeviceMemoryIsOutOfMemory) {
  auto rt = Emulated(1, 0, 1000);
  ASSERT_OK_AND_ASSIGN(void* a, rt->Allocate(Device::Cuda(0), 600));
  EXPECT_THAT(rt->Allocate(Device::Cuda(0), 600),
              StatusIs(StatusCode::kOutOfMemory, "400 free"));
  rt->Free(Device::Cuda(0), a);
}

TEST(EmulatedRuntimeTest, CopiesRunInStreamOrderAndEventsWaitForThem) {
  auto rt = Emulated(1);
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* dev, rt->Allocate(d, 4096));
  std::vector<uint8_t> a(4096, 1), b(4096, 2), out(4096, 0);
  // Two copies into the same place: the later one must win.
  ASSERT_OK(rt->CopyToDeviceAsync(d, s, dev, a.data(), 4096));
  ASSERT_OK(rt->CopyToDeviceAsync(d, s, dev, b.data(), 4096));
  ASSERT_OK(rt->CopyToHostAsync(d, s, out.data(), dev, 4096));
  ASSERT_OK_AND_ASSIGN(Event e, rt->RecordEvent(d, s));
  ASSERT_OK(rt->WaitEvent(e));
  EXPECT_EQ(out, b);
  EXPECT_EQ(rt->CopiesExecuted(), 3u);
  rt->DestroyEvent(e);
  rt->Free(d, dev);
  rt->DestroyStream(d, s);
  EXPECT_TRUE(rt->NothingLive());
}

TEST(EmulatedRuntimeTest, InjectedCopyFailureSurfacesAtTheNextEvent) {
  auto rt = Emulated(1, /*fail_after=*/2);
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* dev, rt->Allocate(d, 16));
  std::vector<uint8_t> src(16, 9);
  ASSERT_OK(rt->CopyToDeviceAsync(d, s, dev, src.data(), 16));
  ASSERT_OK_AND_ASSIGN(Event first, rt->RecordEvent(d, s));
  ASSERT_OK(rt->CopyToDeviceAsync(d, s, dev, src.data(), 16));  // fails async
  ASSERT_OK_AND_ASSIGN(Event second, rt->RecordEvent(d, s));
  EXPECT_OK(rt->WaitEvent(first));
  EXPECT_THAT(rt->WaitEvent(second),
              StatusIs(StatusCode::kDeviceError, "injected"));
  EXPECT_THAT(rt->Synchronize(d, s), StatusIs(StatusCode::kDeviceError, ""));
  rt->DestroyEvent(first);
  rt->DestroyEvent(second);
  rt->Free(d, dev);
  rt->DestroyStream(d, s);
  EXPECT_TRUE(rt->NothingLive());
}

TEST(EmulatedRuntimeTest, CopyOutsideTheDevicesAllocationsIsRejected) {
  auto rt = Emulated(2);
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(Device::Cuda(0)));
  ASSERT_OK_AND_ASSIGN(void* on1, rt->Allocate(Device::Cuda(1), 16));
  ASSERT_OK_AND_ASSIGN(void* on0, rt->Allocate(Device::Cuda(0), 16));
  std::vector<uint8_t> src(32);
  EXPECT_THAT(rt->CopyToDeviceAsync(Device::Cuda(0), s, on1, src.data(), 16),
              StatusIs(StatusCode::kDeviceError, "not inside an allocation"));
  EXPECT_THAT(rt->CopyToDeviceAsync(Device::Cuda(0), s, on0, src.data(), 17),
              StatusIs(StatusCode::kDeviceError, "not inside an allocation"));
  EXPECT_THAT(rt->CopyToDeviceAsync(Device::Cuda(1), s, on1, src.data(), 16),
              StatusIs(StatusCode::kDeviceError, "stream of cuda:0"));
  rt->Free(Device::Cuda(0), on0);
  rt->Free(Device::Cuda(1), on1);
  rt->DestroyStream(Device::Cuda(0), s);
}

TEST(EmulatedRuntimeTest, UnshuffleMatchesTheHostCodec) {
  auto rt = Emulated(1);
  const Device d = Device::Cuda(0);
  const uint64_t n = 4099;  // a partial trailing element
  std::vector<std::byte> raw(n), shuffled(n), back(n);
  for (uint64_t i = 0; i < n; ++i) raw[i] = static_cast<std::byte>(i * 7 + 3);
  ShuffleBytes(raw, shuffled, 4);
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* src, rt->Allocate(d, n));
  ASSERT_OK_AND_ASSIGN(void* dst, rt->Allocate(d, n));
  ASSERT_OK(rt->CopyToDeviceAsync(d, s, src, shuffled.data(), n));
  ASSERT_OK(rt->UnshuffleAsync(d, s, dst, src, n, 4));
  ASSERT_OK(rt->CopyToHostAsync(d, s, back.data(), dst, n));
  ASSERT_OK(rt->Synchronize(d, s));
  EXPECT_EQ(back, raw);
  EXPECT_THAT(rt->UnshuffleAsync(d, s, dst, src, n, 1),
              StatusIs(StatusCode::kInvalidArgument, "elem_size 1"));
  rt->Free(d, src);
  rt->Free(d, dst);
  rt->DestroyStream(d, s);
}

TEST(EmulatedRuntimeTest, PublicFactoryMakesNDevices) {
  std::unique_ptr<DeviceRuntime> rt = NewEmulatedRuntime(3);
  EXPECT_EQ(rt->DeviceCount().value_or(-1), 3);
}

}  // namespace
}  // namespace rckpt
