#include "engine/staging_ring.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "runtime/emulated_runtime.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

TEST(StagingRingTest, SlotsFitInsideCapacity) {
  auto rt = NewTestRuntime({.device_count = 1});
  ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 1 << 20, 300000));
  EXPECT_GE(ring->slot_bytes(), 300000u) << "the largest piece fits a slot";
  EXPECT_EQ(ring->slot_bytes() % 4096, 0u);
  EXPECT_LE(ring->capacity(), 1u << 20);
  EXPECT_GE(ring->capacity() / ring->slot_bytes(), 2u);
  ASSERT_OK_AND_ASSIGN(auto tiny, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 1, 1 << 20));
  EXPECT_EQ(tiny->slot_bytes(), 1u);
  ring.reset();
  tiny.reset();
  rt->ReleasePool();
  EXPECT_EQ(rt->LivePinned(), 0);
}

// A 1000 x 1000 float32 tensor is 4,000,000 bytes, not a multiple of 4 KiB:
// its slot is rounded up to hold it, so it never takes the host's path.
TEST(StagingRingTest, AnOddSizedLargestPieceFitsItsSlot) {
  auto rt = NewTestRuntime({.device_count = 1});
  ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 64 << 20, 4000000));
  EXPECT_EQ(ring->slot_bytes(), 4001792u);  // 977 pages
  EXPECT_GE(ring->capacity() / ring->slot_bytes(), 2u);
  // Capped at half the capacity (rounded down to 4 KiB), two slots at least.
  ASSERT_OK_AND_ASSIGN(auto capped, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 6000000, 4000000));
  EXPECT_EQ(capped->slot_bytes(), 2998272u);
  EXPECT_EQ(capped->capacity() / capped->slot_bytes(), 2u);
  ring.reset();
  capped.reset();
  rt->ReleasePool();
  EXPECT_EQ(rt->LivePinned(), 0);
}

TEST(StagingRingTest, AcquireRecyclesTheOldestSlotOnceItsCopyIsDone) {
  auto rt = NewTestRuntime({.device_count = 1});
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 8192, 4096));
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* dev, rt->Allocate(d, 4096 * 3));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(StagingRing::Slot slot, ring->Acquire(4096));
    std::memset(slot.data, 'a' + i, 4096);
    ASSERT_OK(rt->CopyToDeviceAsync(d, s, static_cast<char*>(dev) + 4096 * i,
                                    slot.data, 4096));
    ASSERT_OK_AND_ASSIGN(Event e, rt->RecordEvent(d, s));
    ring->Retire(slot, e);
  }
  ASSERT_OK(ring->Drain());
  EXPECT_EQ(ring->high_water(), 8192u);
  std::vector<char> back(4096 * 3);
  ASSERT_OK(rt->CopyToHostAsync(d, s, back.data(), dev, back.size()));
  ASSERT_OK(rt->Synchronize(d, s));
  EXPECT_EQ(back[0], 'a');
  EXPECT_EQ(back[4096], 'b');
  EXPECT_EQ(back[8192], 'c');
  rt->Free(d, dev);
  rt->DestroyStream(d, s);
  ring.reset();
  EXPECT_TRUE(rt->NothingLive());
}

TEST(StagingRingTest, FailedCopyIsStickyForLaterAcquires) {
  auto rt =
      NewTestRuntime({.device_count = 1, .fail_after_copies = 1});
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 2, 1));
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* dev, rt->Allocate(d, 1));
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(StagingRing::Slot slot, ring->Acquire(1));
    ASSERT_OK(rt->CopyToDeviceAsync(d, s, dev, slot.data, 1));
    ASSERT_OK_AND_ASSIGN(Event e, rt->RecordEvent(d, s));
    ring->Retire(slot, e);
  }
  EXPECT_THAT(ring->Acquire(1), StatusIs(StatusCode::kDeviceError, "injected"));
  EXPECT_THAT(ring->Acquire(1), StatusIs(StatusCode::kDeviceError, "injected"));
  EXPECT_THAT(ring->Drain(), StatusIs(StatusCode::kDeviceError, "injected"));
  rt->Free(d, dev);
  rt->DestroyStream(d, s);
  ring.reset();
  EXPECT_TRUE(rt->NothingLive());
}

TEST(StagingRingTest, ManyWorkersNeverExceedCapacity) {
  auto rt = NewTestRuntime({.device_count = 1});
  const Device d = Device::Cuda(0);
  ASSERT_OK_AND_ASSIGN(auto ring, StagingRing::Create(*rt->pool(), *rt, Device::Cuda(0), 4 * 1024, 1024));
  ASSERT_OK_AND_ASSIGN(Stream s, rt->CreateStream(d));
  ASSERT_OK_AND_ASSIGN(void* dev, rt->Allocate(d, 1024));
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto slot = ring->Acquire(1000);
        if (!slot.ok()) {
          ++failures;
          return;
        }
        if (!rt->CopyToDeviceAsync(d, s, dev, slot->data, 1000).ok())
          ++failures;
        auto e = rt->RecordEvent(d, s);
        if (!e.ok()) ++failures;
        ring->Retire(*slot, *e);
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_OK(ring->Drain());
  EXPECT_LE(ring->high_water(), ring->capacity());
  EXPECT_GT(ring->high_water(), 0u);
  rt->Free(d, dev);
  rt->DestroyStream(d, s);
}

}  // namespace
}  // namespace rckpt
