// AsyncSaver: a snapshot on the caller's thread, then the ordinary Save of
// that snapshot on the saver's thread. Only public headers are used: the
// persist is exactly rckpt::Save, so it inherits every guarantee of it.
#include "rckpt/async_save.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/caller_streams.h"
#include "runtime/device_pool.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"

namespace rckpt {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr uint64_t kTensorAlign = 64;
constexpr uint64_t kPage = 4096;
// Below this a copy thread costs more than it saves.
constexpr uint64_t kBytesPerCopyThread = 16ull << 20;
// Memory bandwidth is saturated well before this many threads.
constexpr int kMaxCopyThreads = 8;

uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Host memory the saver keeps from one save to the next.
struct HostArena {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data;
  uint64_t capacity = 0;

  Status Reserve(uint64_t bytes) {
    if (bytes <= capacity) return Status::Ok();
    data.reset();  // the old snapshot is written; do not hold both
    capacity = 0;
    const uint64_t size = AlignUp(bytes, kPage);
    void* p = std::aligned_alloc(kPage, size);
    if (p == nullptr) {
      return Status::OutOfMemory("asynchronous save: cannot allocate a snapshot buffer of " +
                                 std::to_string(size) + " bytes");
    }
    data.reset(static_cast<std::byte*>(p));
    capacity = size;
    return Status::Ok();
  }
};

// Pinned memory and one side stream per device, of one runtime.
class DeviceStaging {
 public:
  ~DeviceStaging() { Release(); }

  // Drops everything held of another runtime, then makes sure `bytes` of
  // pinned memory are held.
  Status Reserve(DeviceRuntime* runtime, Device device, uint64_t bytes) {
    if (runtime != runtime_) Release();
    runtime_ = runtime;
    if (bytes <= capacity_) return Status::Ok();
    if (pinned_ != nullptr) runtime_->FreePinned(pinned_);
    pinned_ = nullptr;
    capacity_ = 0;
    const uint64_t size = AlignUp(bytes, kPage);
    Result<void*> p = runtime_->AllocatePinned(device, size);
    if (!p.ok()) return p.status().WithContext("asynchronous save: pinned snapshot buffer");
    pinned_ = static_cast<std::byte*>(*p);
    capacity_ = size;
    return Status::Ok();
  }

  Result<Stream> StreamFor(Device device) {
    auto it = streams_.find(device);
    if (it != streams_.end()) return it->second;
    Result<Stream> s = runtime_->CreateStream(device);
    if (!s.ok()) return s.status();
    streams_.emplace(device, *s);
    return *s;
  }

  std::byte* pinned() const { return pinned_; }
  uint64_t capacity() const { return capacity_; }
  DeviceRuntime* runtime() const { return runtime_; }

  // A copy into the pinned memory could not be waited for: it and the
  // streams go to the runtime's retired memory (DevicePool::Retire), freed
  // only once their device is settled; the next save pins anew.
  void Abandon(Device device) {
    if (runtime_ == nullptr) return;
    DeviceRuntime* rt = runtime_;
    PoolFor pool(*rt);
    if (pinned_ != nullptr) {
      pool->Retire(device, std::shared_ptr<void>(pinned_, [rt](void* p) { rt->FreePinned(p); }),
                   capacity_);
    }
    for (const auto& [on, stream] : streams_) {
      const auto d = on;  // a copy: Clang 14 captures no structured binding
      pool->Retire(d, std::shared_ptr<void>(stream.handle, [rt, d](void* h) {
                     rt->DestroyStream(d, Stream{h});
                   }),
                   0);
    }
    streams_.clear();
    pinned_ = nullptr;
    capacity_ = 0;
  }

 private:
  void Release() {
    if (runtime_ == nullptr) return;
    for (const auto& [device, stream] : streams_) runtime_->DestroyStream(device, stream);
    streams_.clear();
    if (pinned_ != nullptr) runtime_->FreePinned(pinned_);
    pinned_ = nullptr;
    capacity_ = 0;
    runtime_ = nullptr;
  }

  DeviceRuntime* runtime_ = nullptr;
  std::byte* pinned_ = nullptr;
  uint64_t capacity_ = 0;
  std::map<Device, Stream> streams_;
};

// Source tensors that copies which could not be waited for may still read:
// never handed back, and held from a global list so that they stay reachable
// (a leak checker sees them kept, not lost).
void KeepForever(std::vector<Tensor> sources) {
  static std::mutex mu;
  static auto* kept = new std::vector<Tensor>();  // never freed, on purpose
  std::lock_guard<std::mutex> lock(mu);
  for (Tensor& t : sources) kept->push_back(std::move(t));
}

// The events of one snapshot's device copies; waited for once, by the
// caller (WaitSnapshot) or the persist, whichever comes first.
// The device-to-host copies of a snapshot: their events, and the source
// tensors they read, held (their owners kept alive) until the copies are
// done, so that a checkpoint dropped as soon as Save returns cannot hand
// their memory back to an allocator that reuses it while they run.
class SnapshotFence {
 public:
  SnapshotFence(DeviceRuntime* runtime, std::vector<Event> events, Device device,
                std::vector<Tensor> sources)
      : runtime_(runtime), events_(std::move(events)), device_(device),
        sources_(std::move(sources)) {}
  ~SnapshotFence() {
    (void)Wait();
    // Copies that could not be waited for may still read the sources: their
    // memory is never handed back, as the snapshot's pinned memory is not.
    if (unsettled_) KeepForever(std::move(sources_));
  }

  Status Wait() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Event e : events_) {
      Status s = runtime_->WaitEvent(e);
      if (!s.ok()) unsettled_ = true;
      if (status_.ok() && !s.ok()) {
        status_ = s.WithContext("asynchronous save: copying device tensors to the snapshot");
      }
      runtime_->DestroyEvent(e);
    }
    events_.clear();
    if (!unsettled_) sources_.clear();
    return status_;
  }

  Device device() const { return device_; }  // whose context pinned the snapshot

  // Whether a wait failed: the copies may still write the snapshot.
  bool unsettled() {
    std::lock_guard<std::mutex> lock(mu_);
    return unsettled_;
  }

 private:
  std::mutex mu_;
  DeviceRuntime* runtime_;
  std::vector<Event> events_;
  const Device device_;
  Status status_;
  bool unsettled_ = false;
  std::vector<Tensor> sources_;
};

// One tensor (or sharded block) of the checkpoint and where its snapshot goes.
struct Item {
  const Tensor* source;
  bool device;
  uint64_t offset;  // in the host arena or the pinned buffer
};

struct Segment {
  std::byte* dst;
  const std::byte* src;
  uint64_t bytes;
};

// Copies the segments on up to `threads` threads, each an equal share of
// the bytes (large tensors are split between threads).
void ParallelCopy(const std::vector<Segment>& segments, uint64_t total, int threads) {
  const uint64_t wanted = std::max<uint64_t>(1, total / kBytesPerCopyThread);
  const int n = static_cast<int>(std::min<uint64_t>(wanted, std::max(threads, 1)));
  auto copy_range = [&](uint64_t begin, uint64_t end) {
    uint64_t pos = 0;
    for (const Segment& s : segments) {
      const uint64_t lo = std::max(begin, pos), hi = std::min(end, pos + s.bytes);
      if (lo < hi) std::memcpy(s.dst + (lo - pos), s.src + (lo - pos), hi - lo);
      pos += s.bytes;
      if (pos >= end) break;
    }
  };
  if (n <= 1) {
    copy_range(0, total);
    return;
  }
  std::vector<std::thread> workers;
  const uint64_t share = AlignUp((total + n - 1) / n, kTensorAlign);
  for (int i = 1; i < n; ++i) {
    const uint64_t begin = std::min(total, share * i), end = std::min(total, share * (i + 1));
    workers.emplace_back(copy_range, begin, end);
  }
  copy_range(0, std::min(total, share));
  for (std::thread& w : workers) w.join();
}

int CopyThreads(int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(requested > 0 ? requested : cores, kMaxCopyThreads);
}

// Where every tensor of a checkpoint goes in its snapshot: host ones into
// the arena, device ones into pinned memory.
struct SnapshotPlan {
  std::vector<Item> items;  // its tensors, then its shard blocks, in order
  uint64_t host_bytes = 0;
  uint64_t device_bytes = 0;
  Device first_device;  // of the first device tensor (whose context pins)
};

SnapshotPlan PlanSnapshot(const Checkpoint& ck) {
  SnapshotPlan plan;
  auto place = [&](const Tensor& t) {
    const bool device = !t.device().is_cpu();
    if (device && plan.device_bytes == 0) plan.first_device = t.device();
    uint64_t& end = device ? plan.device_bytes : plan.host_bytes;
    plan.items.push_back(Item{&t, device, end});
    end = AlignUp(end + t.nbytes(), kTensorAlign);
  };
  for (const TensorEntry& e : ck.tensors()) place(e.tensor);
  for (const ShardedTensorEntry& e : ck.sharded_tensors()) {
    for (const TensorShard& s : e.shards) place(s.block);
  }
  return plan;
}

// Enqueues the copy of every device tensor into `staging`'s pinned memory
// (held for plan.device_bytes), each device's after the caller's work on it
// so far, then one event per device after its last copy; the caller's
// stream waits for that event, so its later writes to the tensors wait for
// the copies without the host waiting. The events go to `*fence_out`.
Status CopyDeviceTensors(const SnapshotPlan& plan, DeviceRuntime& runtime,
                         const SaveOptions& options, DeviceStaging& staging,
                         std::shared_ptr<SnapshotFence>* fence_out) {
  CallerStreams caller(runtime, options.caller_stream);
  std::map<Device, Stream> used;
  std::vector<Event> events;
  Status s;
  for (const Item& it : plan.items) {
    if (!it.device || it.source->nbytes() == 0) continue;
    const Device d = it.source->device();
    Result<Stream> stream = staging.StreamFor(d);
    if (!stream.ok()) {
      s = stream.status();
      break;
    }
    if (used.emplace(d, *stream).second) {
      s = caller.WaitForCaller(d, *stream);
      if (!s.ok()) break;
    }
    s = runtime.CopyToHostAsync(d, *stream, staging.pinned() + it.offset, it.source->data(),
                                it.source->nbytes());
    if (!s.ok()) break;
  }
  for (const auto& [d, stream] : used) {
    Result<Event> e = runtime.RecordEvent(d, stream);
    if (e.ok()) {
      events.push_back(*e);
    } else if (s.ok()) {
      s = e.status();
    }
    if (s.ok()) s = caller.CallerWaitsFor(d, stream);
  }
  if (!s.ok()) {
    // Copies already enqueued write into the pinned buffer: let them end,
    // and when that cannot be waited for, keep it from the next save.
    Status waited;
    for (const auto& [d, stream] : used) {
      Status w = runtime.Synchronize(d, stream);
      if (waited.ok()) waited = w;
    }
    for (Event e : events) runtime.DestroyEvent(e);
    if (!waited.ok()) {
      staging.Abandon(plan.first_device);
      s = Status(waited.code(), s.message() + "; waiting for the copies: " + waited.message());
    }
    return s.WithContext("asynchronous save: copying device tensors to the snapshot");
  }
  std::vector<Tensor> sources;
  for (const Item& it : plan.items) {
    if (it.device && it.source->nbytes() != 0) sources.push_back(*it.source);
  }
  *fence_out = std::make_shared<SnapshotFence>(&runtime, std::move(events), plan.first_device,
                                               std::move(sources));
  return Status::Ok();
}

// Copies every host tensor into `arena` on up to `threads` threads; returns
// the bytes copied.
uint64_t CopyHostTensors(const SnapshotPlan& plan, std::byte* arena, int threads) {
  std::vector<Segment> segments;
  for (const Item& it : plan.items) {
    if (it.device || it.source->nbytes() == 0) continue;
    segments.push_back(Segment{arena + it.offset, static_cast<const std::byte*>(it.source->data()),
                               it.source->nbytes()});
  }
  uint64_t copied = 0;
  for (const Segment& s : segments) copied += s.bytes;
  ParallelCopy(segments, copied, threads);
  return copied;
}

// The same checkpoint over the snapshot: every tensor a host view of
// `arena` or `pinned` that records the original device as its origin.
Result<Checkpoint> SnapshotView(const Checkpoint& ck, const SnapshotPlan& plan,
                                std::byte* arena, std::byte* pinned) {
  size_t next = 0;
  auto view_of = [&](const Tensor& t) {
    const Item& it = plan.items[next++];
    std::byte* base = it.device ? pinned : arena;
    return Tensor::Borrow(TensorView{base + it.offset, t.dtype(), t.shape(), Device::Cpu()});
  };
  Checkpoint snap;
  for (const SectionInfo& s : ck.sections()) {
    RCKPT_RETURN_IF_ERROR(snap.AddSection(s.name, s.role));
  }
  for (const TensorEntry& e : ck.tensors()) {
    RCKPT_RETURN_IF_ERROR(snap.AddTensor(e.section, e.name, view_of(e.tensor), e.role));
    snap.mutable_tensors().back().origin = e.Origin();
  }
  for (const ShardedTensorEntry& e : ck.sharded_tensors()) {
    std::vector<TensorShard> shards;
    shards.reserve(e.shards.size());
    for (const TensorShard& s : e.shards) {
      shards.push_back(TensorShard{s.rank, s.offsets, view_of(s.block), s.Origin()});
    }
    RCKPT_RETURN_IF_ERROR(
        snap.AddShardedTensor(e.section, e.name, e.dtype, e.shape, std::move(shards), e.role));
  }
  snap.mutable_rng() = ck.rng();
  snap.Tree() = ck.Tree();
  snap.Metadata() = ck.Metadata();
  return snap;
}

}  // namespace

struct AsyncSaver::Impl {
  std::mutex call_mu;  // serialises Save and Wait
  std::thread worker;
  std::atomic<bool> in_flight{false};
  std::atomic<bool> cancel{false};

  HostArena host;
  DeviceStaging staging;

  // The last save's outcome when nobody has been told of it yet.
  Status unreported;

  std::mutex fence_mu;
  std::shared_ptr<SnapshotFence> fence;

  mutable std::mutex stats_mu;
  AsyncSaveStats stats;

  void Join() {
    if (worker.joinable()) worker.join();
  }

  Status TakeUnreported() { return std::exchange(unreported, Status::Ok()); }

  Result<Checkpoint> Snapshot(const Checkpoint& ck, const SaveOptions& options,
                              std::shared_ptr<SnapshotFence>* fence_out);
};

Result<Checkpoint> AsyncSaver::Impl::Snapshot(const Checkpoint& ck, const SaveOptions& options,
                                              std::shared_ptr<SnapshotFence>* fence_out) {
  const SnapshotPlan plan = PlanSnapshot(ck);
  RCKPT_RETURN_IF_ERROR(host.Reserve(plan.host_bytes));
  {
    // The last snapshot's copies that could not be waited for keep their
    // pinned memory: this one pins anew.
    std::lock_guard<std::mutex> lock(fence_mu);
    if (fence != nullptr && fence->unsettled()) staging.Abandon(fence->device());
  }
  DeviceRuntime* runtime = options.runtime;
  if (runtime == nullptr && (plan.device_bytes > 0 || staging.runtime() != nullptr)) {
    runtime = &DefaultRuntime();
  }
  // Pinned memory of another runtime goes now: that runtime need not outlive
  // this save.
  if (staging.runtime() != nullptr && staging.runtime() != runtime) {
    RCKPT_RETURN_IF_ERROR(staging.Reserve(runtime, plan.first_device, 0));
  }
  if (plan.device_bytes > 0) {
    RCKPT_RETURN_IF_ERROR(staging.Reserve(runtime, plan.first_device, plan.device_bytes));
    RCKPT_RETURN_IF_ERROR(CopyDeviceTensors(plan, *runtime, options, staging, fence_out));
  }
  const uint64_t copied = CopyHostTensors(plan, host.data.get(), CopyThreads(options.threads));
  RCKPT_ASSIGN_OR_RETURN(Checkpoint snap,
                         SnapshotView(ck, plan, host.data.get(), staging.pinned()));
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.snapshot_bytes = copied + plan.device_bytes;
  stats.snapshot_capacity = host.capacity + staging.capacity();
  return snap;
}

AsyncSaver::AsyncSaver() : impl_(std::make_unique<Impl>()) {}

AsyncSaver::~AsyncSaver() {
  std::lock_guard<std::mutex> lock(impl_->call_mu);
  impl_->Join();
  Status s = impl_->TakeUnreported();
  if (!s.ok()) {
    std::fprintf(stderr, "rckpt: an asynchronous save failed and was never waited for: %s\n",
                 s.ToString().c_str());
  }
}

Status AsyncSaver::Save(const std::string& path, const Checkpoint& ck, SaveOptions options,
                        DoneCallback done) {
  std::lock_guard<std::mutex> lock(impl_->call_mu);
  const Clock::time_point wait_start = Clock::now();
  impl_->Join();
  const double waited = SecondsSince(wait_start);
  RCKPT_RETURN_IF_ERROR(impl_->TakeUnreported());
  if (path.empty()) return Status::InvalidArgument("asynchronous save: the path is empty");

  if (!options.caller_stream) options.caller_stream = ck.caller_stream();
  const Clock::time_point start = Clock::now();
  std::shared_ptr<SnapshotFence> fence;
  Result<Checkpoint> snap = impl_->Snapshot(ck, options, &fence);
  if (!snap.ok()) return snap.status().WithContext("save to '" + path + "'");
  {
    std::lock_guard<std::mutex> stats_lock(impl_->stats_mu);
    impl_->stats.wait_seconds = waited;
    impl_->stats.snapshot_seconds = SecondsSince(start);
    ++impl_->stats.saves;
  }
  {
    std::lock_guard<std::mutex> fence_lock(impl_->fence_mu);
    impl_->fence = fence;
  }

  impl_->cancel = false;
  options.progress = [impl = impl_.get(), user = std::move(options.progress)](uint64_t d,
                                                                              uint64_t t) {
    if (impl->cancel) return false;
    return user ? user(d, t) : true;
  };
  impl_->in_flight = true;
  impl_->worker = std::thread([impl = impl_.get(), path, snap = std::move(*snap),
                               options = std::move(options), fence = std::move(fence),
                               done = std::move(done)]() mutable {
    const Clock::time_point persist_start = Clock::now();
    Status s = fence ? fence->Wait().WithContext("save to '" + path + "'") : Status::Ok();
    if (s.ok() && impl->cancel) s = Status::IoError("save to '" + path + "': cancelled");
    if (s.ok()) s = rckpt::Save(path, snap, options);
    {
      std::lock_guard<std::mutex> stats_lock(impl->stats_mu);
      impl->stats.persist_seconds = SecondsSince(persist_start);
    }
    if (done) {
      done(s);
    } else {
      impl->unreported = s;  // read only after join
    }
    impl->in_flight = false;
  });
  return Status::Ok();
}

Status AsyncSaver::Wait() {
  std::lock_guard<std::mutex> lock(impl_->call_mu);
  impl_->Join();
  return impl_->TakeUnreported();
}

Status AsyncSaver::WaitSnapshot() {
  std::shared_ptr<SnapshotFence> fence;
  {
    std::lock_guard<std::mutex> lock(impl_->fence_mu);
    fence = impl_->fence;
  }
  return fence ? fence->Wait() : Status::Ok();
}

void AsyncSaver::Cancel() { impl_->cancel = true; }

bool AsyncSaver::Done() const { return !impl_->in_flight; }

AsyncSaveStats AsyncSaver::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

}  // namespace rckpt
