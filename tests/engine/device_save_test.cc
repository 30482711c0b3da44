#include "engine/device_save.h"

#include "engine/engine_test_util.h"

namespace rckpt {
namespace {

class DeviceSaveTest : public ::testing::Test {
 protected:
  // A device tensor of `n` bytes on emulated cuda:1 holding a known pattern.
  void MakeDeviceTensor(uint64_t n) {
    host_.resize(n);
    for (uint64_t i = 0; i < n; ++i)
      host_[i] = static_cast<std::byte>(i * 31 + 7);
    auto p = rt_->Allocate(Device::Cuda(1), n);
    ASSERT_TRUE(p.ok());
    device_ = *p;
    auto s = rt_->CreateStream(Device::Cuda(1));
    ASSERT_OK(
        rt_->CopyToDeviceAsync(Device::Cuda(1), *s, device_, host_.data(), n));
    ASSERT_OK(rt_->Synchronize(Device::Cuda(1), *s));
    rt_->DestroyStream(Device::Cuda(1), *s);
  }
  void TearDown() override {
    if (device_ != nullptr) rt_->Free(Device::Cuda(1), device_);
    EXPECT_TRUE(rt_->NothingLive());
  }
  TensorView View() const {
    return TensorView{device_,
                      DType::kU8,
                      {static_cast<int64_t>(host_.size())},
                      Device::Cuda(1)};
  }

  std::unique_ptr<EmulatedRuntime> rt_ =
      NewEmulatedRuntimeForTesting({.device_count = 2});
  std::vector<std::byte> host_;
  void* device_ = nullptr;
};

TEST_F(DeviceSaveTest, SinkSeesTheWritersChunksInOrder) {
  MakeDeviceTensor(1000000);
  {
    ASSERT_OK_AND_ASSIGN(
        auto streamer, DeviceToHostStreamer::Create(*rt_, 256 << 10, 64 << 10));
    std::vector<std::byte> got;
    std::vector<uint64_t> offsets;
    ASSERT_OK(streamer->StreamTensor(
        View(), [&](uint64_t off, std::span<const std::byte> b) {
          offsets.push_back(off);
          EXPECT_EQ(off, got.size());
          got.insert(got.end(), b.begin(), b.end());
          return Status::Ok();
        }));
    EXPECT_EQ(got, host_);
    ASSERT_EQ(offsets.size(), 16u);  // ceil(1e6 / 64 KiB)
    EXPECT_EQ(offsets[1], 64u << 10);
    EXPECT_LE(streamer->high_water(), 256u << 10);
    EXPECT_GT(streamer->high_water(), 64u << 10);  // copies ran ahead
  }
}

TEST_F(DeviceSaveTest, ChunksLargerThanASlotAreAssembled) {
  MakeDeviceTensor(300000);
  ASSERT_OK_AND_ASSIGN(auto streamer,
                       DeviceToHostStreamer::Create(*rt_, 32 << 10, 128 << 10));
  std::vector<std::byte> got;
  std::vector<size_t> sizes;
  ASSERT_OK(streamer->StreamTensor(View(), [&](uint64_t off, auto b) {
    EXPECT_EQ(off, got.size());
    sizes.push_back(b.size());
    got.insert(got.end(), b.begin(), b.end());
    return Status::Ok();
  }));
  EXPECT_EQ(got, host_);
  EXPECT_THAT(sizes, ::testing::ElementsAre(128u << 10, 128u << 10,
                                            300000 - (256u << 10)));
  EXPECT_LE(streamer->high_water(), 32u << 10);
}

TEST_F(DeviceSaveTest, PerTensorChunkSizeOverridesTheDefault) {
  MakeDeviceTensor(100000);
  ASSERT_OK_AND_ASSIGN(auto streamer,
                       DeviceToHostStreamer::Create(*rt_, 64 << 10, 16 << 10));
  std::vector<uint64_t> offsets;
  std::vector<std::byte> got;
  ASSERT_OK(streamer->StreamTensor(
      View(),
      [&](uint64_t off, std::span<const std::byte> b) {
        offsets.push_back(off);
        got.insert(got.end(), b.begin(), b.end());
        return Status::Ok();
      },
      /*chunk_bytes=*/9984));
  EXPECT_EQ(got, host_);
  ASSERT_EQ(offsets.size(), 11u);  // ceil(100000 / 9984)
  EXPECT_EQ(offsets[3], 3u * 9984);
}

TEST_F(DeviceSaveTest, SinkErrorStopsTheStream) {
  MakeDeviceTensor(100000);
  ASSERT_OK_AND_ASSIGN(auto streamer,
                       DeviceToHostStreamer::Create(*rt_, 16 << 10, 4 << 10));
  int calls = 0;
  EXPECT_THAT(streamer->StreamTensor(View(),
                                     [&](uint64_t, auto) {
                                       return ++calls == 3
                                                  ? Status::IoError("disk full")
                                                  : Status::Ok();
                                     }),
              StatusIs(StatusCode::kIoError, "disk full"));
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(rt_->LiveEvents(), 0);
}

TEST_F(DeviceSaveTest, CopyFailureIsReturned) {
  rt_ =
      NewEmulatedRuntimeForTesting({.device_count = 2, .fail_after_copies = 4});
  MakeDeviceTensor(100000);  // copy 1
  ASSERT_OK_AND_ASSIGN(auto streamer,
                       DeviceToHostStreamer::Create(*rt_, 16 << 10, 4 << 10));
  EXPECT_THAT(streamer->StreamTensor(
                  View(), [](uint64_t, auto) { return Status::Ok(); }),
              StatusIs(StatusCode::kDeviceError, "injected"));
}

TEST_F(DeviceSaveTest, ZeroSizesAreInvalid) {
  EXPECT_THAT(DeviceToHostStreamer::Create(*rt_, 0, 4096),
              StatusIs(StatusCode::kInvalidArgument, "staging_bytes 0"));
}

}  // namespace
}  // namespace rckpt
