// The CUDA runtime's pool (runtime/device_pool.h) over the stand-in driver,
// which waits in cuMemFree, cuMemFreeHost and cuCtxSynchronize for every
// stream of the device, as a real one does: loads and saves lease pinned
// staging, scratch and streams instead of making and freeing their own, so
// after the first call they allocate nothing, free nothing, and never wait
// for work that is not theirs. Also what a forked child and a reset device
// meet.
#include <sys/wait.h>
#include <unistd.h>

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
const Device kCuda1 = Device::Cuda(1);

// What costs a real device dearly, as the stand-in counted it. (Events are
// kept too, but how many a call has in flight at once varies with timing.)
struct Costly {
  uint64_t pinned, device, frees, host_frees, streams, ctx_syncs, stream_syncs;
  friend bool operator==(const Costly&, const Costly&) = default;
};

Costly CountCostly() {
  const RckptStandinStats s = CudaStandinStats();
  return {s.mem_host_allocs, s.mem_allocs, s.mem_frees,   s.mem_host_frees,
          s.stream_creates,  s.ctx_syncs,  s.stream_syncs};
}

std::ostream& operator<<(std::ostream& os, const Costly& c) {
  return os << "{pinned " << c.pinned << ", device " << c.device << ", frees " << c.frees
            << ", host frees " << c.host_frees << ", streams " << c.streams << ", ctx syncs "
            << c.ctx_syncs << ", stream syncs " << c.stream_syncs << "}";
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override { Configure({}); }
  void TearDown() override {
    device_.clear();
    if (runtime_ != nullptr) runtime_->ReleasePool();
    runtime_.reset();
    EXPECT_EQ(CudaStandinViolations(), "");
    EXPECT_EQ(CudaStandinContextDepth(), 0);
    const RckptStandinStats s = CudaStandinStats();
    EXPECT_EQ(s.live_pinned, 0);
    EXPECT_EQ(s.live_streams, 0);
    EXPECT_EQ(s.live_events, 0);
  }

  void Configure(RckptStandinConfig config, uint64_t cap = kDefaultPinnedPoolBytes) {
    device_.clear();
    runtime_.reset();
    ConfigureCudaStandin(config);
    auto rt = NewCudaRuntime({.driver_library = CudaStandinPath(), .pinned_pool_bytes = cap});
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(*rt);
  }
  DeviceRuntime& Runtime() { return *runtime_; }

  // Device memory holding `host`'s bytes, freed at the test's end.
  Tensor OnDevice(Device d, const Tensor& host) {
    auto p = Runtime().Allocate(d, host.nbytes());
    EXPECT_TRUE(p.ok());
    Stream s{};
    EXPECT_OK(Runtime().CopyToDeviceAsync(d, s, *p, host.data(), host.nbytes()));
    EXPECT_OK(Runtime().Synchronize(d, s));
    DeviceRuntime* rt = &Runtime();
    device_.push_back(std::shared_ptr<void>(*p, [rt, d](void* q) { rt->Free(d, q); }));
    return Tensor::Adopt(host.dtype(), host.shape(), d, device_.back(), *p);
  }

  static Tensor Floats(int64_t n, float scale) {
    Tensor t = *Tensor::Empty(DType::kF32, {n});
    auto* f = static_cast<float*>(t.data());
    for (int64_t i = 0; i < n; ++i) f[i] = scale * static_cast<float>(i % 977) / 977.0f;
    return t;
  }

  // A checkpoint on both devices, saved with zstd and the shuffle, so that
  // a load un-shuffles on the devices (and so needs their scratch).
  Checkpoint DeviceState(float scale = 1.0f) {
    Checkpoint ck;
    EXPECT_OK(ck.AddTensor("model", "w0", OnDevice(kCuda0, Floats(100000, scale))));
    EXPECT_OK(ck.AddTensor("model", "w1", OnDevice(kCuda1, Floats(30001, scale))));
    EXPECT_OK(ck.AddTensor("model", "h", Floats(5000, scale)));
    return ck;
  }
  SaveOptions Saving() {
    SaveOptions o;
    o.codec = Codec::kZstd;
    o.shuffle = Shuffle::kOn;
    o.chunk_bytes = 128 << 10;
    o.fs = &fs_;
    o.runtime = &Runtime();
    return o;
  }
  LoadOptions Loading() {
    LoadOptions o;
    o.fs = &fs_;
    o.runtime = &Runtime();
    return o;
  }
  // Restores `path` into `targets`' device memory, then checks the bytes.
  void LoadInto(const std::string& path, const Checkpoint& targets) {
    std::vector<LoadTarget> ts;
    for (const TensorEntry& e : targets.tensors()) {
      ts.push_back(LoadTarget{e.name, const_cast<void*>(e.tensor.data()), e.tensor.dtype(),
                              e.tensor.shape(), e.tensor.device()});
    }
    ASSERT_OK(rckpt::LoadInto(path, ts, Loading()));
  }

  MemFileSystem fs_;
  std::unique_ptr<DeviceRuntime> runtime_;
  std::vector<std::shared_ptr<void>> device_;
};

TEST_F(PoolTest, RepeatedLoadsAndSavesAllocateAndFreeNothingAfterTheFirst) {
  const Checkpoint ck = DeviceState();
  const Checkpoint targets = DeviceState(0.0f);
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  LoadInto("/a.rckpt", targets);
  const Costly first = CountCostly();
  const DevicePoolStats warm = Runtime().PoolStats();
  EXPECT_GT(warm.pinned_bytes, 0u);
  EXPECT_GT(warm.streams, 0);
  EXPECT_GT(warm.device_scratch_bytes, 0u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(Save("/b" + std::to_string(i) + ".rckpt", ck, Saving()));
    LoadInto("/b" + std::to_string(i) + ".rckpt", targets);
  }
  EXPECT_EQ(CountCostly(), first) << "4 saves and 4 loads after the first of each";
  const DevicePoolStats after = Runtime().PoolStats();
  EXPECT_EQ(after.pinned_allocations, warm.pinned_allocations);
  EXPECT_EQ(after.device_allocations, warm.device_allocations);
  EXPECT_EQ(after.streams_created, warm.streams_created);
  // One per chunk would be more than 8 a round (5 device chunks a load, and the save's waits).
  EXPECT_LE(after.events_created, warm.events_created + 8) << "events are reused";
  EXPECT_EQ(after.pinned_bytes, warm.pinned_bytes);
  EXPECT_LE(after.pinned_bytes, after.pinned_cap);
  EXPECT_EQ(first.ctx_syncs + first.stream_syncs, 0u) << "waits are on blocking events";
  // What was restored is what was saved.
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/b3.rckpt", Loading()));
  for (const char* name : {"w0", "w1"}) {
    const Tensor& t = back.FindTensor(name)->tensor;
    std::vector<std::byte> got(t.nbytes()), want(t.nbytes());
    ASSERT_OK(Runtime().CopyToHostAsync(t.device(), Stream{}, got.data(), t.data(), t.nbytes()));
    const Tensor& w = targets.FindTensor(name)->tensor;
    ASSERT_OK(Runtime().CopyToHostAsync(w.device(), Stream{}, want.data(), w.data(), w.nbytes()));
    ASSERT_OK(Runtime().Synchronize(t.device(), Stream{}));
    EXPECT_EQ(got, want) << name;
  }
}

TEST_F(PoolTest, ALoadAndASaveFinishWhileAnUnrelatedStreamIsBusy) {
  const Checkpoint ck = DeviceState();
  const Checkpoint targets = DeviceState(0.0f);
  for (const bool warm : {false, true}) {
    // Another thread's long kernel on a stream rckpt knows nothing of.
    ASSERT_OK_AND_ASSIGN(Stream other, Runtime().CreateStream(kCuda0));
    void* gate = HoldCudaStandinStream(other.handle, 0);
    auto done = std::async(std::launch::async, [&] {
      Status s = Save("/busy.rckpt", ck, Saving());
      if (s.ok()) LoadInto("/busy.rckpt", targets);
      return s;
    });
    const bool finished = done.wait_for(std::chrono::seconds(300)) == std::future_status::ready;
    ReleaseCudaStandinStream(gate);
    EXPECT_TRUE(finished) << (warm ? "a later" : "the first")
                          << " save and load waited for an unrelated stream";
    ASSERT_OK(done.get());
    Runtime().DestroyStream(kCuda0, other);
  }
}

TEST_F(PoolTest, ReleaseFreesWhatThePoolHoldsAndTheNextCallBuildsItAgain) {
  const Checkpoint ck = DeviceState();
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  ASSERT_OK(Load("/a.rckpt", Loading()).status());
  EXPECT_GT(CudaStandinStats().live_pinned, 0);
  Runtime().ReleasePool();
  const DevicePoolStats s = Runtime().PoolStats();
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.device_scratch_bytes, 0u);
  EXPECT_EQ(s.streams, 0);
  EXPECT_EQ(s.events, 0);
  EXPECT_EQ(CudaStandinStats().live_pinned, 0);
  EXPECT_EQ(CudaStandinStats().live_streams, 0);
  EXPECT_EQ(CudaStandinStats().live_events, 0);
  ASSERT_OK(Load("/a.rckpt", Loading()).status());
  EXPECT_GT(Runtime().PoolStats().pinned_bytes, 0u);
}

TEST_F(PoolTest, PastTheCapALoadUsesUnpinnedMemoryAndStillRestoresEveryByte) {
  Configure({}, /*cap=*/1 << 20);
  const Checkpoint ck = DeviceState();
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));  // 64 MiB of staging asked for
  const uint64_t pinned_before = CudaStandinStats().mem_host_allocs;
  const Checkpoint targets = DeviceState(0.0f);
  LoadInto("/a.rckpt", targets);
  const DevicePoolStats s = Runtime().PoolStats();
  EXPECT_EQ(s.pinned_cap, 1u << 20);
  EXPECT_LE(s.pinned_bytes, 1u << 20);
  EXPECT_GT(s.unpinned_leases, 0u);
  EXPECT_EQ(CudaStandinStats().mem_host_allocs, pinned_before);
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/a.rckpt", Loading()));
  const Tensor& t = back.FindTensor("w0")->tensor;
  std::vector<float> got(100000);
  ASSERT_OK(Runtime().CopyToHostAsync(kCuda0, Stream{}, got.data(), t.data(), t.nbytes()));
  ASSERT_OK(Runtime().Synchronize(kCuda0, Stream{}));
  EXPECT_EQ(std::memcmp(got.data(), Floats(100000, 1.0f).data(), t.nbytes()), 0);
}

TEST_F(PoolTest, FourLoadsAndAnAsynchronousSaveAtOnce) {
  const Checkpoint ck = DeviceState();
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  AsyncSaver saver;
  std::vector<std::future<Status>> loads;
  for (int i = 0; i < 4; ++i) {
    loads.push_back(std::async(std::launch::async, [&] {
      LoadOptions o = Loading();
      o.threads = 2;
      Result<Checkpoint> back = Load("/a.rckpt", o);
      if (!back.ok()) return back.status();
      const Tensor& t = back->FindTensor("w1")->tensor;
      std::vector<float> got(30001);
      RCKPT_RETURN_IF_ERROR(
          Runtime().CopyToHostAsync(kCuda1, Stream{}, got.data(), t.data(), t.nbytes()));
      RCKPT_RETURN_IF_ERROR(Runtime().Synchronize(kCuda1, Stream{}));
      if (std::memcmp(got.data(), Floats(30001, 1.0f).data(), t.nbytes()) != 0) {
        return Status::Corruption("a concurrent load restored other bytes");
      }
      return Status::Ok();
    }));
  }
  SaveOptions so = Saving();
  ASSERT_OK(saver.Save("/async.rckpt", ck, so));
  for (auto& l : loads) EXPECT_OK(l.get());
  ASSERT_OK(saver.Wait());
  ASSERT_OK(Load("/async.rckpt", Loading()).status());
  EXPECT_LE(Runtime().PoolStats().pinned_bytes, Runtime().PoolStats().pinned_cap);
}

// A child forked after the parent used CUDA cannot use it: it is told why
// and what to do, and never touches the parent's pooled memory or streams.
TEST_F(PoolTest, AForkedChildIsToldToSpawnAndNeverReusesThePool) {
  const Checkpoint ck = DeviceState();
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  ASSERT_OK(Load("/a.rckpt", Loading()).status());
  ASSERT_GT(Runtime().PoolStats().pinned_bytes, 0u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int failed = 0;
    const DevicePoolStats s = Runtime().PoolStats();
    if (s.pinned_bytes != 0 || s.streams != 0 || s.events != 0) failed |= 1;
    Result<Checkpoint> back = Load("/a.rckpt", Loading());
    const std::string msg = back.status().message();
    if (back.ok() || back.status().code() != StatusCode::kDeviceUnavailable) failed |= 2;
    if (msg.find("was forked") == std::string::npos) failed |= 4;
    if (msg.find("'spawn'") == std::string::npos) failed |= 8;
    if (failed != 0) std::fprintf(stderr, "child: %d: %s\n", failed, msg.c_str());
    _exit(failed);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the pool was kept, 2: not DeviceUnavailable, "
                                       "4/8: the message lacks the cause or the fix";
  ASSERT_OK(Load("/a.rckpt", Loading()).status());  // the parent goes on
}

// After cudaDeviceReset the streams, events, buffers and module rckpt kept
// for the device are gone: the next load notices, drops them and succeeds.
TEST_F(PoolTest, AfterADeviceResetTheNextLoadMakesItsResourcesAnew) {
  const Checkpoint ck = DeviceState();
  ASSERT_OK(Save("/a.rckpt", ck, Saving()));
  {
    ASSERT_OK_AND_ASSIGN(Checkpoint warm, Load("/a.rckpt", Loading()));
  }
  device_.clear();  // the test's own device memory, which a reset would take
  const uint64_t resets = Runtime().pool()->device_resets();
  ResetCudaStandinDevice(0);
  ResetCudaStandinDevice(1);
  LoadStats stats;
  LoadOptions o = Loading();
  o.stats = &stats;
  ASSERT_OK_AND_ASSIGN(Checkpoint back, Load("/a.rckpt", o));
  EXPECT_EQ(stats.host_unshuffled_bytes, 0u) << stats.host_unshuffle_reason;
  EXPECT_GT(Runtime().pool()->device_resets(), resets) << "the reset was noticed";
  const Tensor& t = back.FindTensor("w0")->tensor;
  std::vector<float> got(100000);
  ASSERT_OK(Runtime().CopyToHostAsync(kCuda0, Stream{}, got.data(), t.data(), t.nbytes()));
  ASSERT_OK(Runtime().Synchronize(kCuda0, Stream{}));
  EXPECT_EQ(std::memcmp(got.data(), Floats(100000, 1.0f).data(), t.nbytes()), 0);
}

}  // namespace
}  // namespace rckpt
