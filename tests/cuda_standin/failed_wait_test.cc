// When recording or waiting on an event fails, a copy may still be running:
// the memory it reads or writes (pinned staging, scratch, a load's
// destinations, an upload's source, a snapshot) is retired in the pool,
// never reused or freed until the device is settled, and the error names
// the cause. Over the stand-in driver, whose frees do not wait: the device
// is held, so the copies a failed call enqueued are still queued when it
// returns, and freeing or refilling what they use is a violation.
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "rckpt/async_save.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime/device_pool.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

const Device kCuda0 = Device::Cuda(0);
constexpr int kUnknownError = 999;  // CUDA_ERROR_UNKNOWN: not sticky
constexpr int64_t kFloats = 150000;

class FailedWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ConfigureCudaStandin({});
    auto rt = NewCudaRuntime({.driver_library = CudaStandinPath()});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(*rt);
  }
  void TearDown() override {
    LetGo();
    device_.clear();
    runtime_->ReleasePool();
    EXPECT_EQ(runtime_->PoolStats().retired, 0) << "the device settled: retired memory is freed";
    runtime_.reset();
    EXPECT_EQ(CudaStandinViolations(), "");
    EXPECT_EQ(CudaStandinContextDepth(), 0);
    const RckptStandinStats s = CudaStandinStats();
    EXPECT_EQ(s.live_allocations[0], 0);
    EXPECT_EQ(s.live_pinned, 0);
    EXPECT_EQ(s.live_streams, 0);
    EXPECT_EQ(s.live_events, 0);
  }
  DeviceRuntime& Runtime() { return *runtime_; }

  // Nothing queued on cuda:0 runs from now on, and nothing can be waited
  // for, until LetGo.
  void HoldAndFailWaits() {
    gate_ = HoldCudaStandinDevice(0);
    FailCudaStandinWaits(kUnknownError);
  }
  void LetGo() {
    LiftCudaStandinFaults();
    if (gate_ != nullptr) ReleaseCudaStandinStream(gate_);
    gate_ = nullptr;
  }
  // Releases the pool while the failed call's copies are still queued (a
  // pool that frees what they use is caught at once), then lets the device
  // go: a pool that waits for the device to settle ends after that.
  void ReleasePoolWhileHeld() {
    auto released = std::async(std::launch::async, [&] { Runtime().ReleasePool(); });
    (void)released.wait_for(std::chrono::milliseconds(500));
    LetGo();
    released.get();
  }

  static Tensor Floats(int64_t n, float scale) {
    Tensor t = *Tensor::Empty(DType::kF32, {n});
    auto* f = static_cast<float*>(t.data());
    for (int64_t i = 0; i < n; ++i) f[i] = scale * static_cast<float>(i % 977) / 977.0f;
    return t;
  }
  Tensor OnDevice(const Tensor& host) {
    auto p = Runtime().Allocate(kCuda0, host.nbytes());
    EXPECT_TRUE(p.ok());
    EXPECT_OK(Runtime().CopyToDeviceAsync(kCuda0, Stream{}, *p, host.data(), host.nbytes()));
    EXPECT_OK(Runtime().Synchronize(kCuda0, Stream{}));
    DeviceRuntime* rt = &Runtime();
    device_.push_back(std::shared_ptr<void>(*p, [rt](void* q) { rt->Free(kCuda0, q); }));
    return Tensor::Adopt(host.dtype(), host.shape(), kCuda0, device_.back(), *p);
  }
  std::vector<float> Back(const Tensor& t) {
    std::vector<float> got(t.nbytes() / sizeof(float));
    EXPECT_OK(Runtime().CopyToHostAsync(t.device(), Stream{}, got.data(), t.data(), t.nbytes()));
    EXPECT_OK(Runtime().Synchronize(t.device(), Stream{}));
    return got;
  }
  static std::vector<float> Values(const Tensor& host) {
    const auto* f = static_cast<const float*>(host.data());
    return std::vector<float>(f, f + host.nbytes() / sizeof(float));
  }

  SaveOptions Saving() {
    SaveOptions o;
    o.chunk_bytes = 64 << 10;
    o.fs = &fs_;
    o.runtime = &Runtime();
    return o;
  }
  LoadOptions Loading() {
    LoadOptions o;
    o.fs = &fs_;
    o.runtime = &Runtime();
    o.threads = 2;
    o.staging_bytes = 256 << 10;  // 4 slots: a refilled slot is certain
    return o;
  }

  MemFileSystem fs_;
  std::unique_ptr<DeviceRuntime> runtime_;
  std::vector<std::shared_ptr<void>> device_;
  void* gate_ = nullptr;
};

TEST_F(FailedWaitTest, ALoadThatCannotWaitRetiresWhatItsCopiesUseAndTheNextLoadIsIntact) {
  const Tensor w = Floats(kFloats, 1.0f);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", OnDevice(w)));
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  ASSERT_OK(Load("/a.rckpt", Loading()).status());  // the pool holds staging now

  HoldAndFailWaits();
  Result<Checkpoint> failed = Load("/a.rckpt", Loading());
  EXPECT_THAT(failed.status(), StatusIs(StatusCode::kDeviceError, "cuStreamSynchronize"));
  EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("cuEventRecord"));
  const DevicePoolStats stats = Runtime().PoolStats();
  EXPECT_GT(stats.retired, 0);
  EXPECT_GT(stats.retired_bytes, 0u);

  // A second load while the first one's copies are still queued: it must
  // not be handed their staging.
  LiftCudaStandinFaults();
  const int queued = CudaStandinStats().pending_ops;
  auto second = std::async(std::launch::async, [&] { return Load("/a.rckpt", Loading()); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (CudaStandinStats().pending_ops <= queued && std::chrono::steady_clock::now() < deadline &&
         second.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
  }
  LetGo();
  ASSERT_OK_AND_ASSIGN(Checkpoint back, second.get());
  EXPECT_EQ(Back(back.FindTensor("w")->tensor), Values(w));
  EXPECT_EQ(CudaStandinViolations(), "");
}

TEST_F(FailedWaitTest, ASaveThatCannotWaitRetiresItsStaging) {
  const Tensor w = Floats(kFloats, 2.0f);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", OnDevice(w)));
  HoldAndFailWaits();
  Status s = Save("/s.rckpt", ck, Saving());
  EXPECT_THAT(s, StatusIs(StatusCode::kDeviceError, "cuStreamSynchronize"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("cuEventRecord"));
  EXPECT_GT(Runtime().PoolStats().retired_bytes, 0u);
  ReleasePoolWhileHeld();
  EXPECT_EQ(CudaStandinViolations(), "");
  ASSERT_OK(Save("/t.rckpt", ck, Saving()));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/t.rckpt", Loading()));
  EXPECT_EQ(Back(back.FindTensor("w")->tensor), Values(w));
}

TEST_F(FailedWaitTest, AnAsynchronousSnapshotThatCannotWaitRetiresItsPinnedMemory) {
  const Tensor w = Floats(kFloats, 3.0f);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", OnDevice(w)));
  HoldAndFailWaits();
  {
    AsyncSaver saver;
    Status s = saver.Save("/as.rckpt", ck, Saving());
    EXPECT_THAT(s, StatusIs(StatusCode::kDeviceError, "cuStreamSynchronize"));
    EXPECT_THAT(s.message(), ::testing::HasSubstr("cuEventRecord"));
  }  // the saver goes: its snapshot memory must not go with it
  EXPECT_GT(Runtime().PoolStats().retired_bytes, 0u);
  ReleasePoolWhileHeld();
  EXPECT_EQ(CudaStandinViolations(), "");
  AsyncSaver saver;
  ASSERT_OK(saver.Save("/as.rckpt", ck, Saving()));
  ASSERT_OK(saver.Wait());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/as.rckpt", Loading()));
  EXPECT_EQ(Back(back.FindTensor("w")->tensor), Values(w));
}

TEST_F(FailedWaitTest, AnUploadThatCannotWaitRetiresItsSourceAndDestination) {
  // A sharded tensor is assembled on the host, then uploaded whole.
  const Tensor top = Floats(kFloats / 2, 4.0f), bottom = Floats(kFloats / 2, 5.0f);
  Checkpoint ck;
  std::vector<TensorShard> shards = {{0, {0}, top, {}}, {1, {kFloats / 2}, bottom, {}}};
  ASSERT_OK(ck.AddShardedTensor("model", "w", DType::kF32, {kFloats}, shards));
  ASSERT_OK(Save("/sh.rckpt", ck, Saving()));
  LoadOptions o = Loading();
  o.map_location = MapLocation::To(kCuda0);
  HoldAndFailWaits();
  Result<Checkpoint> failed = Load("/sh.rckpt", o);
  EXPECT_THAT(failed.status(), StatusIs(StatusCode::kDeviceError, "cuStreamSynchronize"));
  EXPECT_THAT(failed.status().message(), ::testing::HasSubstr("tensor 'w'"));
  EXPECT_GT(Runtime().PoolStats().retired_bytes, 0u);
  ReleasePoolWhileHeld();
  EXPECT_EQ(CudaStandinViolations(), "");
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/sh.rckpt", o));
  std::vector<float> want = Values(top);
  const std::vector<float> rest = Values(bottom);
  want.insert(want.end(), rest.begin(), rest.end());
  EXPECT_EQ(Back(back.FindTensor("w")->tensor), want);
}

}  // namespace
}  // namespace rckpt
