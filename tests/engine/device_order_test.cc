// The engine's device work against the caller's: ordering after (and
// before) the caller's stream without synchronising a device, the caller's
// allocator, "auto" as the calling thread's current device, and the host
// un-shuffle where the device cannot. Each test holds the caller's stream
// (EmulatedRuntime::HoldStream), so a missing ordering shows as the wrong
// bytes, not as a race.
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <thread>

#include "engine/engine_test_util.h"
#include "rckpt/async_save.h"
#include "test_runtime.h"

namespace rckpt {
namespace {

using testing::BytesOf;
using testing::DevicesOf;
using testing::ExpectSameBytes;
using testing::HippynnLike;
using testing::HostBytes;
using testing::SmoothTensor;

const Device kCuda0 = Device::Cuda(0);
const Device kCuda1 = Device::Cuda(1);
const std::string kPath = "/order.rckpt";

// Lets a blocked call run on another thread, waits a while (long enough for
// an unordered call to have finished), then releases the held stream.
template <typename F>
auto RunWhileHeld(std::shared_ptr<void>& hold, F call) {
  std::promise<decltype(call())> result;
  std::thread t([&] { result.set_value(call()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  hold.reset();
  t.join();
  return result.get_future().get();
}

class DeviceOrderTest : public ::testing::Test {
 public:
  DeviceOrderTest() : rt_(NewTestRuntime({.device_count = 2})) {}
  ~DeviceOrderTest() override { EXPECT_TRUE(rt_->NothingLive()); }

  void SaveFile(const Checkpoint& ck, SaveOptions o = {}) {
    o.fs = &fs_;
    o.runtime = rt_.get();
    ASSERT_OK(Save(kPath, ck, o));
  }
  LoadOptions Options() {
    LoadOptions o;
    o.fs = &fs_;
    o.runtime = rt_.get();
    return o;
  }
  // The caller's stream: cuda:N's default stream, as torch's is by default.
  CallerStream DefaultStreams() {
    return [this](Device d) -> Result<Stream> {
      ++caller_stream_calls_[d.index];
      return Stream{};
    };
  }
  // Writes `bytes` into device memory `dst` on `device`'s default stream.
  void CallerWrites(Device device, void* dst, const std::vector<std::byte>& bytes) {
    pending_.push_back(bytes);
    ASSERT_OK(rt_->CopyToDeviceAsync(device, Stream{}, dst, pending_.back().data(), bytes.size()));
  }
  void SyncCaller(Device device) { ASSERT_OK(rt_->Synchronize(device, Stream{})); }

  std::unique_ptr<EmulatedRuntime> rt_;
  MemFileSystem fs_;
  std::map<int, int> caller_stream_calls_;
  std::deque<std::vector<std::byte>> pending_;
};

TEST_F(DeviceOrderTest, LoadIntoWaitsForTheCallersPendingWorkOnTheTargets) {
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", SmoothTensor(DType::kF32, {4096}, 1)));
  SaveFile(ck);
  ASSERT_OK_AND_ASSIGN(void* target, rt_->Allocate(kCuda0, 4096 * 4));
  std::shared_ptr<void> hold = rt_->HoldStream(kCuda0, Stream{});
  // torch still has a write to the target queued (behind the hold).
  CallerWrites(kCuda0, target, std::vector<std::byte>(4096 * 4, std::byte{0x77}));
  LoadOptions o = Options();
  o.caller_stream = DefaultStreams();
  Status s = RunWhileHeld(hold, [&] {
    return LoadInto(kPath, {LoadTarget{"w", target, DType::kF32, {4096}, kCuda0}}, o);
  });
  ASSERT_OK(s);
  SyncCaller(kCuda0);
  Tensor view = Tensor::Borrow(TensorView{target, DType::kF32, {4096}, kCuda0});
  EXPECT_EQ(BytesOf(*rt_, view), HostBytes(ck.tensors()[0].tensor))
      << "the file's bytes land after the caller's pending write, not before it";
  EXPECT_EQ(caller_stream_calls_[0], 1) << "asked once, on the calling thread";
  rt_->Free(kCuda0, target);
}

// A device allocator handing out memory the caller's stream may still be
// writing, as torch's caching allocator hands out blocks freed by work that
// is still queued.
class RecyclingAllocator final : public DeviceAllocator {
 public:
  explicit RecyclingAllocator(EmulatedRuntime& rt) : rt_(rt) {}
  Status Allocate(std::span<const Request> requests, std::vector<Tensor>* out) override {
    ++calls;
    for (const Request& r : requests) {
      seen.push_back(std::string(r.name));
      RCKPT_ASSIGN_OR_RETURN(uint64_t n, ShapeBytes(r.shape, r.dtype));
      RCKPT_ASSIGN_OR_RETURN(void* p, rt_.Allocate(r.device, n));
      EmulatedRuntime* rt = &rt_;
      const Device d = r.device;
      std::shared_ptr<void> owner(p, [rt, d](void* q) { rt->Free(d, q); });
      made.push_back(p);
      out->push_back(Tensor::Adopt(bad_shape ? DType::kU8 : r.dtype, r.shape, r.device,
                                   std::move(owner), p));
    }
    if (fail) return Status::OutOfMemory("the caller's allocator is out of memory");
    return Status::Ok();
  }
  EmulatedRuntime& rt_;
  int calls = 0;
  std::vector<std::string> seen;
  std::vector<void*> made;
  bool fail = false;
  bool bad_shape = false;
};

TEST_F(DeviceOrderTest, LoadedDeviceTensorsComeFromTheCallersAllocatorInOneCall) {
  const Checkpoint saved = HippynnLike(kCuda1, 256);
  SaveFile(saved);
  RecyclingAllocator alloc(*rt_);
  LoadOptions o = Options();
  o.device_allocator = &alloc;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    EXPECT_EQ(alloc.calls, 1);
    EXPECT_EQ(alloc.seen.size(), 4u) << "the model, loss and optimizer tensors on cuda:1";
    for (const TensorEntry& e : ck.tensors()) {
      if (e.tensor.device().is_cpu()) continue;
      EXPECT_NE(std::find(alloc.made.begin(), alloc.made.end(), e.tensor.data()), alloc.made.end())
          << e.name << " is the allocator's memory";
    }
    ExpectSameBytes(*rt_, saved, ck);
  }
  EXPECT_TRUE(rt_->NothingLive()) << "the tensors free through their owner";
}

// With an allocator, the device un-shuffle's scratch is the allocator's too
// (torch's caching allocator in Python), asked for once per device after
// the tensors; the runtime's pool holds none.
TEST_F(DeviceOrderTest, TheUnshuffleScratchComesFromTheCallersAllocator) {
  const Checkpoint saved = HippynnLike(kCuda1, 4096);
  SaveFile(saved, SaveOptions{.codec = Codec::kZstd, .shuffle = Shuffle::kOn});
  RecyclingAllocator alloc(*rt_);
  LoadOptions o = Options();
  o.device_allocator = &alloc;
  LoadStats stats;
  o.stats = &stats;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt_, saved, ck);
  }
  EXPECT_EQ(alloc.calls, 2);
  ASSERT_EQ(alloc.seen.size(), 5u);
  EXPECT_EQ(alloc.seen.back(), "(device un-shuffle scratch)");
  EXPECT_GT(stats.device_unshuffled_bytes, 0u);
  EXPECT_EQ(stats.host_unshuffled_bytes, 0u);
  EXPECT_EQ(rt_->PoolStats().device_scratch_bytes, 0u);
  EXPECT_EQ(stats.device_pool.device_allocations, 0u);
}

TEST_F(DeviceOrderTest, ALoadWritesTheCallersRecycledMemoryOnlyAfterItsPendingWork) {
  Checkpoint saved;
  ASSERT_OK(saved.AddTensor("model", "w", SmoothTensor(DType::kF32, {2048}, 3), Role::kModel));
  saved.mutable_tensors().back().origin = kCuda1;
  SaveFile(saved);
  RecyclingAllocator alloc(*rt_);
  std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
  LoadOptions o = Options();
  o.device_allocator = &alloc;
  o.caller_stream = DefaultStreams();
  // The memory's previous user, still queued on the caller's stream, writes
  // it once the hold is released; the load must not be overtaken by it.
  Result<Checkpoint> ck = RunWhileHeld(hold, [&] {
    struct Writer final : DeviceAllocator {
      RecyclingAllocator* inner;
      DeviceOrderTest* test;
      Status Allocate(std::span<const Request> r, std::vector<Tensor>* out) override {
        RCKPT_RETURN_IF_ERROR(inner->Allocate(r, out));
        test->CallerWrites(kCuda1, inner->made.back(), std::vector<std::byte>(2048 * 4, std::byte{0x55}));
        return Status::Ok();
      }
    } writer;
    writer.inner = &alloc;
    writer.test = this;
    LoadOptions with = o;
    with.device_allocator = &writer;
    return Load(kPath, with);
  });
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  SyncCaller(kCuda1);
  ExpectSameBytes(*rt_, saved, *ck);
}

TEST_F(DeviceOrderTest, AnAllocatorErrorFailsTheLoadBeforeAnyByteIsRead) {
  SaveFile(HippynnLike(kCuda1, 64));
  RecyclingAllocator alloc(*rt_);
  alloc.fail = true;
  LoadOptions o = Options();
  o.device_allocator = &alloc;
  EXPECT_THAT(Load(kPath, o),
              StatusIs(StatusCode::kOutOfMemory, "device_allocator: the caller's allocator"));
  alloc.fail = false;
  alloc.bad_shape = true;
  EXPECT_THAT(Load(kPath, o), StatusIs(StatusCode::kInvalidArgument, "was asked for as f32"));
}

TEST_F(DeviceOrderTest, ASaveReadsADeviceTensorOnlyAfterTheCallersPendingWrite) {
  ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda1, 1024));
  const std::vector<std::byte> old_bytes(1024, std::byte{1}), new_bytes(1024, std::byte{2});
  CallerWrites(kCuda1, p, old_bytes);
  SyncCaller(kCuda1);
  std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
  CallerWrites(kCuda1, p, new_bytes);  // the optimizer step that made the value being saved
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", Tensor::Borrow(TensorView{p, DType::kU8, {1024}, kCuda1})));
  SaveOptions o;
  o.caller_stream = DefaultStreams();
  Status s = RunWhileHeld(hold, [&] {
    SaveOptions with = o;
    with.fs = &fs_;
    with.runtime = rt_.get();
    return Save(kPath, ck, with);
  });
  ASSERT_OK(s);
  LoadOptions lo = Options();
  lo.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(kPath, lo));
  EXPECT_EQ(HostBytes(back.tensors()[0].tensor), new_bytes);
  rt_->Free(kCuda1, p);
}

TEST_F(DeviceOrderTest, AnAsyncSaveIsOrderedAfterThePendingStepAndBeforeTheNextOne) {
  ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda1, 1 << 16));
  const std::vector<std::byte> before(1 << 16, std::byte{2}), saved_bytes(1 << 16, std::byte{3}),
      later(1 << 16, std::byte{4});
  CallerWrites(kCuda1, p, before);
  SyncCaller(kCuda1);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", Tensor::Borrow(TensorView{p, DType::kU8, {1 << 16}, kCuda1})));
  {
    AsyncSaver saver;
    std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
    CallerWrites(kCuda1, p, saved_bytes);  // the step whose result is saved, still queued
    SaveOptions o;
    o.fs = &fs_;
    o.runtime = rt_.get();
    o.caller_stream = DefaultStreams();
    // Returns while the caller's stream (and so the snapshot's copy) is
    // still held: nothing on the host waits for the device.
    ASSERT_OK(saver.Save(kPath, ck, o));
    CallerWrites(kCuda1, p, later);  // the next step
    hold.reset();
    ASSERT_OK(saver.Wait());
  }
  SyncCaller(kCuda1);
  LoadOptions lo = Options();
  lo.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(kPath, lo));
  EXPECT_EQ(HostBytes(back.tensors()[0].tensor), saved_bytes)
      << "the snapshot holds the step before the save, not the one after it";
  Tensor now = Tensor::Borrow(TensorView{p, DType::kU8, {1 << 16}, kCuda1});
  EXPECT_EQ(BytesOf(*rt_, now), later);
  rt_->Free(kCuda1, p);
}

// A checkpoint that carries its tensors' stream (as rckpt::libtorch's Add*
// make it) is ordered after it by a Save given no caller_stream.
TEST_F(DeviceOrderTest, ASaveUsesTheCheckpointsOwnCallerStream) {
  ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda1, 1024));
  const std::vector<std::byte> old_bytes(1024, std::byte{1}), new_bytes(1024, std::byte{2});
  CallerWrites(kCuda1, p, old_bytes);
  SyncCaller(kCuda1);
  std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
  CallerWrites(kCuda1, p, new_bytes);  // the optimizer step, still queued
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", Tensor::Borrow(TensorView{p, DType::kU8, {1024}, kCuda1})));
  ck.set_caller_stream(DefaultStreams());
  Status s = RunWhileHeld(hold, [&] {
    SaveOptions with;  // no caller_stream: the checkpoint's
    with.fs = &fs_;
    with.runtime = rt_.get();
    return Save(kPath, ck, with);
  });
  ASSERT_OK(s);
  EXPECT_EQ(caller_stream_calls_[1], 1);
  LoadOptions lo = Options();
  lo.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(kPath, lo));
  EXPECT_EQ(HostBytes(back.tensors()[0].tensor), new_bytes);
  rt_->Free(kCuda1, p);
}

TEST_F(DeviceOrderTest, AnAsyncSaveUsesTheCheckpointsOwnCallerStream) {
  ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda1, 1 << 16));
  const std::vector<std::byte> before(1 << 16, std::byte{2}), saved_bytes(1 << 16, std::byte{3});
  CallerWrites(kCuda1, p, before);
  SyncCaller(kCuda1);
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "w", Tensor::Borrow(TensorView{p, DType::kU8, {1 << 16}, kCuda1})));
  ck.set_caller_stream(DefaultStreams());
  {
    AsyncSaver saver;
    std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
    CallerWrites(kCuda1, p, saved_bytes);  // the step whose result is saved, still queued
    SaveOptions o;
    o.fs = &fs_;
    o.runtime = rt_.get();
    ASSERT_OK(saver.Save(kPath, ck, o));
    EXPECT_EQ(caller_stream_calls_[1], 1) << "the checkpoint's stream was not asked for";
    hold.reset();
    ASSERT_OK(saver.Wait());
  }
  SyncCaller(kCuda1);
  LoadOptions lo = Options();
  lo.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(kPath, lo));
  EXPECT_EQ(HostBytes(back.tensors()[0].tensor), saved_bytes);
  rt_->Free(kCuda1, p);
}

// The snapshot keeps the device tensors it copies (their owners) until the
// copies are done: a checkpoint dropped as soon as Save returns does not
// hand their memory back while the copies are queued.
TEST_F(DeviceOrderTest, AnAsyncSnapshotHoldsItsSourcesUntilItsCopiesAreDone) {
  ASSERT_OK_AND_ASSIGN(void* p, rt_->Allocate(kCuda1, 1 << 16));
  const std::vector<std::byte> saved_bytes(1 << 16, std::byte{5});
  CallerWrites(kCuda1, p, saved_bytes);
  SyncCaller(kCuda1);
  auto released = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<void> owner(p, [released](void*) { *released = true; });
  AsyncSaver saver;
  {
    Checkpoint ck;
    ASSERT_OK(ck.AddTensor(
        "model", "w", Tensor::Adopt(DType::kU8, {1 << 16}, kCuda1, owner, p)));
    owner.reset();  // the checkpoint's tensor is the only owner now
    ck.set_caller_stream(DefaultStreams());
    std::shared_ptr<void> hold = rt_->HoldStream(kCuda1, Stream{});
    SaveOptions o;
    o.fs = &fs_;
    o.runtime = rt_.get();
    ASSERT_OK(saver.Save(kPath, ck, o));  // returns with the copy queued behind `hold`
    ck = Checkpoint();
    EXPECT_FALSE(*released) << "the source was released while its copy was queued";
    hold.reset();
  }
  ASSERT_OK(saver.Wait());
  EXPECT_TRUE(*released) << "the snapshot kept its source after its copies were done";
  LoadOptions lo = Options();
  lo.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load(kPath, lo));
  EXPECT_EQ(HostBytes(back.tensors()[0].tensor), saved_bytes);
  rt_->Free(kCuda1, p);
}

TEST_F(DeviceOrderTest, AutoIsTheCallingThreadsCurrentDevice) {
  SaveFile(HippynnLike(Device::Cpu(), 64));
  LoadOptions o = Options();
  o.model_device = DeviceSpec::Auto();
  rt_->SetCurrentDevice(1);  // as torch.cuda.set_device(1) under torchrun
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda1);
    EXPECT_EQ(DevicesOf(ck)["database.features"], Device::Cpu());
  }
  rt_->SetCurrentDevice(0);
  ASSERT_OK_AND_ASSIGN(auto plan, PlanLoad(kPath, o));
  EXPECT_EQ(plan[0].target, kCuda0);
  rt_->SetCurrentDevice(-1);
}

TEST_F(DeviceOrderTest, AutoAsksTheCallerOnlyWhenAModelTensorNeedsIt) {
  Checkpoint host_only;
  ASSERT_OK(host_only.AddTensor("metrics", "m", SmoothTensor(DType::kF32, {8}, 1), Role::kHost));
  SaveFile(host_only);
  int asked = 0;
  LoadOptions o = Options();
  o.model_device = DeviceSpec::Auto();
  o.auto_device = [&](int count) -> Result<int> {
    ++asked;
    EXPECT_EQ(count, 2);
    return 1;
  };
  ASSERT_OK(Load(kPath, o).status());
  EXPECT_EQ(asked, 0);
  SaveFile(HippynnLike(Device::Cpu(), 64));
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda1);
  o.auto_device = [](int) -> Result<int> {
    return Status::DeviceUnavailable("torch sees 3 CUDA devices but rckpt sees 2");
  };
  EXPECT_THAT(Load(kPath, o), StatusIs(StatusCode::kDeviceUnavailable, "torch sees 3"));
}

TEST_F(DeviceOrderTest, ShuffledChunksAreUnshuffledOnTheHostWhereTheDeviceCannot) {
  const Checkpoint saved = HippynnLike(kCuda0, 4096);
  SaveFile(saved, SaveOptions{.codec = Codec::kZstd, .shuffle = Shuffle::kOn});
  LoadStats with_kernel, without;
  {
    LoadOptions o = Options();
    o.stats = &with_kernel;
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt_, saved, ck);
  }
  EXPECT_GT(with_kernel.device_unshuffled_bytes, 0u);
  EXPECT_EQ(with_kernel.host_unshuffled_bytes, 0u);
  {
    LoadOptions o = Options();
    o.device_unshuffle = false;  // as where the kernel image does not load
    o.stats = &without;
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt_, saved, ck);
  }
  EXPECT_EQ(without.device_unshuffled_bytes, 0u);
  EXPECT_EQ(without.host_unshuffled_bytes, with_kernel.device_unshuffled_bytes);
  EXPECT_EQ(without.host_unshuffle_reason, "device_unshuffle is off");
  // A chunk larger than a staging slot is decoded whole on the host, so its
  // un-shuffle is the host's too, and the stats say so.
  LoadStats small_ring;
  {
    LoadOptions o = Options();
    o.staging_bytes = 2048;  // slots of 1 KiB: smaller than the weights' chunks
    o.stats = &small_ring;
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt_, saved, ck);
  }
  EXPECT_EQ(small_ring.device_unshuffled_bytes + small_ring.host_unshuffled_bytes,
            with_kernel.device_unshuffled_bytes);
  EXPECT_GT(small_ring.host_unshuffled_bytes, 0u);
  EXPECT_THAT(small_ring.host_unshuffle_reason,
              ::testing::HasSubstr("larger than a staging slot"));
}

// A 1000 x 1000 float32 tensor is 4,000,000 bytes, not a multiple of 4 KiB.
// As the largest chunk (alone, and before a tail chunk) it fits its staging
// slot, so the device un-shuffles every byte of it.
TEST_F(DeviceOrderTest, AnOddSizedLargestChunkIsUnshuffledOnTheDevice) {
  for (const bool tail : {false, true}) {
    Checkpoint saved;
    ASSERT_OK(saved.AddTensor("model", "w",
                              SmoothTensor(DType::kF32, {tail ? 1100 : 1000, 1000}, 9)));
    SaveFile(saved, SaveOptions{.codec = Codec::kZstd,
                                .chunk_bytes = 4000000,
                                .shuffle = Shuffle::kOn});
    LoadStats stats;
    LoadOptions o = Options();
    o.map_location = MapLocation::To(kCuda0);
    o.stats = &stats;
    {
      ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
      EXPECT_TRUE(BytesOf(*rt_, ck.FindTensor("w")->tensor) == HostBytes(saved.FindTensor("w")->tensor))
          << (tail ? "with a tail chunk" : "one chunk");
    }
    EXPECT_EQ(stats.host_unshuffled_bytes, 0u) << stats.host_unshuffle_reason;
    EXPECT_EQ(stats.host_unshuffle_reason, "");
    EXPECT_EQ(stats.device_unshuffled_bytes, tail ? 4400000u : 4000000u);
  }
}

TEST(DeviceOrderNoKernelTest, ARuntimeWithoutTheKernelUnshufflesOnTheHost) {
  auto rt = NewTestRuntime({.device_count = 1, .device_unshuffle = false});
  std::string why;
  EXPECT_FALSE(rt->CanUnshuffle(kCuda0, &why));
  EXPECT_FALSE(why.empty());
  MemFileSystem fs;
  const Checkpoint saved = HippynnLike(kCuda0, 2048);
  ASSERT_OK(Save(kPath, saved,
                 SaveOptions{.codec = Codec::kZstd, .shuffle = Shuffle::kOn, .fs = &fs}));
  LoadStats stats;
  LoadOptions o;
  o.fs = &fs;
  o.runtime = rt.get();
  o.stats = &stats;
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  ExpectSameBytes(*rt, saved, ck);
  EXPECT_GT(stats.host_unshuffled_bytes, 0u);
  EXPECT_THAT(stats.host_unshuffle_reason, ::testing::HasSubstr("cuda:0 cannot un-shuffle"));
  EXPECT_EQ(rt->UnshufflesExecuted(), 0u);
}

// A device whose memory the loaded tensors fill (a training process whose
// caching allocator holds the rest) has no room for the un-shuffle scratch:
// the load un-shuffles on the host instead of failing.
TEST(DeviceOrderFullDeviceTest, NoRoomForTheUnshuffleScratchUnshufflesOnTheHost) {
  const Checkpoint saved = HippynnLike(kCuda0, 4096);
  MemFileSystem fs;
  ASSERT_OK(Save(kPath, saved,
                 SaveOptions{.codec = Codec::kZstd, .shuffle = Shuffle::kOn, .fs = &fs}));
  // What the loaded tensors take on the device (RNG states stay on the host).
  uint64_t device_bytes = 0;
  {
    auto roomy = NewTestRuntime({.device_count = 1});
    LoadOptions po;
    po.fs = &fs;
    po.runtime = roomy.get();
    ASSERT_OK_AND_ASSIGN(Checkpoint probe, Load(kPath, po));
    for (const TensorEntry& e : probe.tensors()) {
      if (e.tensor.device().is_cuda()) device_bytes += e.tensor.nbytes();
    }
  }
  ASSERT_GT(device_bytes, 0u);
  auto rt = NewTestRuntime({.device_count = 1, .device_memory_bytes = device_bytes + 1024});
  LoadStats stats;
  LoadOptions o;
  o.fs = &fs;
  o.runtime = rt.get();
  o.stats = &stats;
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    ExpectSameBytes(*rt, saved, ck);
    EXPECT_EQ(DevicesOf(ck)["model.layer1.weight"], kCuda0);
  }
  EXPECT_GT(stats.host_unshuffled_bytes, 0u);
  EXPECT_THAT(stats.host_unshuffle_reason, ::testing::HasSubstr("no room on cuda:0"));
  EXPECT_EQ(stats.device_unshuffled_bytes, 0u);
  EXPECT_EQ(rt->UnshufflesExecuted(), 0u);
  EXPECT_TRUE(rt->NothingLive());
}

}  // namespace
}  // namespace rckpt
