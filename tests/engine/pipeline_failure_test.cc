// Failures in the middle of a device load end in one clean error, with
// every device buffer, pinned slot, stream and event given back.
#include "engine/engine_test_util.h"
#include "test_runtime.h"
#include "format/file_reader.h"

namespace rckpt {
namespace {

using testing::AddFrom;
using testing::SmoothTensor;

constexpr char kPath[] = "/ck.rckpt";

class PipelineFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 6; ++i) {
      AddFrom(saved_, "model", testing::Numbered("w", i),
              SmoothTensor(DType::kF32, {128, 256}, i), Device::Cuda(i % 2));
    }
    ASSERT_OK(
        Save(kPath, saved_, SaveOptions{.chunk_bytes = 16 << 10, .fs = &fs_}));
  }
  // The copying load (the map_file opt-out): its reads are what the file
  // system under test fails.
  LoadOptions On(DeviceRuntime* rt) {
    LoadOptions o;
    o.map_file = false;
    o.fs = &fs_;
    o.runtime = rt;
    o.threads = 4;
    o.staging_bytes = 64 << 10;
    return o;
  }
  int TotalChunks() {
    auto reader = FileReader::Open(fs_, kPath);
    int n = 0;
    for (const auto& t : (*reader)->manifest().tensors) n += t.chunks.size();
    return n;
  }

  MemFileSystem fs_;
  Checkpoint saved_;
};

TEST_F(PipelineFailureTest, CopyFailingMidwayIsADeviceErrorWithNothingLeaked) {
  const int chunks = TotalChunks();
  ASSERT_GT(chunks, 20);
  for (int fail_at : {1, chunks / 2, chunks}) {
    auto rt = NewTestRuntime(
        {.device_count = 2, .fail_after_copies = fail_at});
    EXPECT_THAT(Load(kPath, On(rt.get())),
                StatusIs(StatusCode::kDeviceError, "injected"))
        << "failing copy " << fail_at;
    EXPECT_TRUE(rt->NothingLive()) << "failing copy " << fail_at;
  }
}

TEST_F(PipelineFailureTest, CorruptChunkMidwayIsCorruptionWithNothingLeaked) {
  auto reader = FileReader::Open(fs_, kPath);
  ASSERT_TRUE(reader.ok());
  const TensorMeta& victim = (*reader)->manifest().tensors[3];
  const ChunkMeta& chunk = victim.chunks[victim.chunks.size() / 2];
  std::vector<std::byte> bytes = *fs_.GetFile(kPath);
  bytes[chunk.offset + chunk.stored_size / 2] ^= std::byte{0x5a};
  fs_.SetFile(kPath, bytes);
  auto rt = NewTestRuntime({.device_count = 2});
  EXPECT_THAT(Load(kPath, On(rt.get())),
              StatusIs(StatusCode::kCorruption, "tensor 'w3'"));
  EXPECT_TRUE(rt->NothingLive());
  // The same file restored to host memory fails the same way.
  LoadOptions host = On(rt.get());
  host.map_location = MapLocation::To(Device::Cpu());
  EXPECT_THAT(Load(kPath, host),
              StatusIs(StatusCode::kCorruption, "tensor 'w3'"));
}

TEST_F(PipelineFailureTest, DeviceOutOfMemoryFreesWhatWasAllocated) {
  // Room for a few tensors of one device, not all of them.
  auto rt = NewTestRuntime(
      {.device_count = 2, .device_memory_bytes = 300 << 10});
  EXPECT_THAT(Load(kPath, On(rt.get())),
              StatusIs(StatusCode::kOutOfMemory, "tensor 'w"));
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(PipelineFailureTest, CancellingADeviceLoadFreesEverything) {
  auto rt = NewTestRuntime({.device_count = 2});
  LoadOptions o = On(rt.get());
  o.progress = [](uint64_t done, uint64_t total) { return done < total / 3; };
  EXPECT_THAT(Load(kPath, o), StatusIs(StatusCode::kIoError, "cancelled"));
  EXPECT_TRUE(rt->NothingLive());
}

TEST_F(PipelineFailureTest, FailedLoadIntoLeavesCallerBuffersAllocated) {
  auto rt =
      NewTestRuntime({.device_count = 2, .fail_after_copies = 5});
  std::vector<LoadTarget> targets;
  for (const TensorEntry& e : saved_.tensors()) {
    auto p = rt->Allocate(Device::Cuda(0), e.tensor.nbytes());
    ASSERT_TRUE(p.ok());
    targets.push_back(
        {e.name, *p, e.tensor.dtype(), e.tensor.shape(), Device::Cuda(0)});
  }
  EXPECT_THAT(LoadInto(kPath, targets, On(rt.get())),
              StatusIs(StatusCode::kDeviceError, "injected"));
  // The pipeline gave back what it leased to the runtime's pool, which frees
  // it when released; the caller's buffers stay theirs.
  rt->ReleasePool();
  EXPECT_EQ(rt->LiveAllocations(0), static_cast<int>(targets.size()));
  EXPECT_EQ(rt->LivePinned(), 0);
  EXPECT_EQ(rt->LiveStreams(), 0);
  EXPECT_EQ(rt->LiveEvents(), 0);
  for (const LoadTarget& t : targets) rt->Free(Device::Cuda(0), t.data);
  EXPECT_TRUE(rt->NothingLive());
}

}  // namespace
}  // namespace rckpt
