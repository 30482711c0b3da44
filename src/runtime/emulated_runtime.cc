#include "runtime/emulated_runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "runtime/device_pool.h"
#include "util/node.h"

namespace rckpt {

bool EmulatedRuntime::NothingLive() {
  ReleasePool();
  for (int d = 0; d < device_count(); ++d) {
    if (LiveAllocations(d) != 0) return false;
  }
  return LivePinned() == 0 && LiveStreams() == 0 && LiveEvents() == 0 &&
         BadFrees() == 0;
}

namespace {

constexpr std::align_val_t kAlign{256};

// One stream: a worker thread running queued operations in order. An
// operation that fails makes the stream's error sticky (as a CUDA stream
// error is): later operations are skipped and every later event reports it.
struct StreamState {
  explicit StreamState(int dev) : device(dev) {
    worker = std::thread([this] { Work(); });
  }
  ~StreamState() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }

  void Enqueue(std::function<Status()> op) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(op));
      ++submitted;
    }
    cv.notify_all();
  }

  // Waits until the first `seq` operations have run; returns the sticky
  // error if it arose at or before `seq`.
  Status WaitFor(uint64_t seq) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return completed >= seq; });
    if (error_seq <= seq) return error;
    return Status::Ok();
  }

  uint64_t Submitted() {
    std::lock_guard<std::mutex> lock(mu);
    return submitted;
  }

  void Work() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stop requested and drained
      std::function<Status()> op = std::move(queue.front());
      queue.pop_front();
      bool skip = !error.ok();
      lock.unlock();
      Status s = skip ? Status::Ok() : op();
      lock.lock();
      ++completed;
      if (!s.ok() && error.ok()) {
        error = s;
        error_seq = completed;
      }
      cv.notify_all();
    }
  }

  const int device;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<Status()>> queue;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  Status error;
  uint64_t error_seq = UINT64_MAX;
  bool stop = false;
  std::thread worker;
};

struct EventState {
  std::shared_ptr<StreamState> stream;
  uint64_t seq = 0;
};

class EmulatedRuntimeImpl final : public EmulatedRuntime {
 public:
  explicit EmulatedRuntimeImpl(const EmulatedRuntimeOptions& options)
      : options_(options),
        name_("emulated(" + std::to_string(options.device_count) + ")"),
        allocs_(options.device_count),
        live_bytes_(options.device_count, 0) {}

  ~EmulatedRuntimeImpl() override {
    pool_.Release();  // through this runtime, while it still works
    current_device_.erase(id_);
    // Streams first (events hold them too): their workers may still touch
    // device memory.
    events_.clear();
    streams_.clear();
    default_streams_.clear();
    for (auto& dev : allocs_) {
      for (auto& [start, size] : dev) {
        ::operator delete(reinterpret_cast<void*>(start), kAlign);
      }
    }
    for (void* p : pinned_) ::operator delete(p, kAlign);
  }

  std::string_view name() const override { return name_; }
  DevicePool* pool() override { return &pool_; }
  Result<int> DeviceCount() override { return options_.device_count; }
  std::string NoDeviceReason() override {
    return options_.device_count == 0 ? "the emulated runtime has 0 devices" : "";
  }
  Result<int> CurrentDevice() override {
    if (options_.device_count == 0) {
      return Status::DeviceUnavailable("CurrentDevice: " + name_ + " has no devices");
    }
    auto it = current_device_.find(id_);
    if (it != current_device_.end()) return it->second;
    return DefaultDeviceIndex(ReadNodeFacts(), options_.device_count);
  }
  void SetCurrentDevice(int device) override { current_device_[id_] = device; }

  std::shared_ptr<void> HoldStream(Device device, Stream stream) override {
    Result<std::shared_ptr<StreamState>> state = FindStream(device, stream);
    if (!state.ok()) return nullptr;
    auto gate = std::make_shared<std::promise<void>>();
    std::shared_future<void> open = gate->get_future().share();
    (*state)->Enqueue([open] {
      open.wait();
      return Status::Ok();
    });
    return std::shared_ptr<void>(new int(0), [gate](int* p) {
      gate->set_value();
      delete p;
    });
  }
  int device_count() const override { return options_.device_count; }

  Result<void*> Allocate(Device device, uint64_t bytes) override {
    RCKPT_RETURN_IF_ERROR(CheckDevice(device, "Allocate"));
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t& live = live_bytes_[device.index];
    if (bytes > options_.device_memory_bytes - live) {
      return Status::OutOfMemory(
          "Allocate on " + device.ToString() + ": " + std::to_string(bytes) +
          " bytes requested, " +
          std::to_string(options_.device_memory_bytes - live) + " free");
    }
    void* p = ::operator new(bytes == 0 ? 1 : bytes, kAlign, std::nothrow);
    if (p == nullptr) {
      return Status::OutOfMemory("Allocate on " + device.ToString() + ": " +
                                 std::to_string(bytes) + " bytes");
    }
    allocs_[device.index][reinterpret_cast<uintptr_t>(p)] = bytes;
    live += bytes;
    return p;
  }

  void Free(Device device, void* ptr) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!device.is_cuda() || device.index < 0 ||
        device.index >= options_.device_count) {
      ++bad_frees_;
      return;
    }
    auto& dev = allocs_[device.index];
    auto it = dev.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == dev.end()) {
      ++bad_frees_;
      return;
    }
    live_bytes_[device.index] -= it->second;
    dev.erase(it);
    ::operator delete(ptr, kAlign);
  }

  Result<void*> AllocatePinned(Device /*device*/, uint64_t bytes) override {
    void* p = ::operator new(bytes == 0 ? 1 : bytes, kAlign, std::nothrow);
    if (p == nullptr) {
      return Status::OutOfMemory("AllocatePinned: " + std::to_string(bytes) +
                                 " bytes");
    }
    std::lock_guard<std::mutex> lock(mu_);
    pinned_.insert(p);
    return p;
  }

  void FreePinned(void* ptr) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (pinned_.erase(ptr) == 0) {
      ++bad_frees_;
      return;
    }
    ::operator delete(ptr, kAlign);
  }

  Result<Stream> CreateStream(Device device) override {
    RCKPT_RETURN_IF_ERROR(CheckDevice(device, "CreateStream"));
    auto state = std::make_shared<StreamState>(device.index);
    std::lock_guard<std::mutex> lock(mu_);
    streams_[state.get()] = state;
    return Stream{state.get()};
  }

  void DestroyStream(Device /*device*/, Stream stream) override {
    std::shared_ptr<StreamState> state;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = streams_.find(stream.handle);
      if (it == streams_.end()) return;
      state = std::move(it->second);
      streams_.erase(it);
    }
    // Events may still hold the state; the worker drains and stops when the
    // last reference goes.
  }

  Status CopyToDeviceAsync(Device device, Stream stream, void* dst,
                           const void* src, uint64_t bytes) override {
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    RCKPT_RETURN_IF_ERROR(
        CheckRange(device, dst, bytes, "CopyToDeviceAsync dst"));
    state->Enqueue(
        [this, dst, src, bytes] { return RunCopy(dst, src, bytes); });
    return Status::Ok();
  }

  Status CopyToHostAsync(Device device, Stream stream, void* dst,
                         const void* src, uint64_t bytes) override {
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    RCKPT_RETURN_IF_ERROR(
        CheckRange(device, src, bytes, "CopyToHostAsync src"));
    state->Enqueue(
        [this, dst, src, bytes] { return RunCopy(dst, src, bytes); });
    return Status::Ok();
  }

  bool CanUnshuffle(Device /*device*/, std::string* why_not) override {
    if (!options_.device_unshuffle && why_not != nullptr) {
      *why_not = "the emulated device un-shuffle is turned off";
    }
    return options_.device_unshuffle;
  }

  Status UnshuffleAsync(Device device, Stream stream, void* dst,
                        const void* src, uint64_t bytes,
                        uint32_t elem_size) override {
    if (!options_.device_unshuffle) {
      return Status::Unsupported("UnshuffleAsync: the emulated device un-shuffle is turned off");
    }
    if (elem_size < 2) {
      return Status::InvalidArgument("UnshuffleAsync: elem_size " +
                                     std::to_string(elem_size) +
                                     ", expected >= 2");
    }
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    RCKPT_RETURN_IF_ERROR(CheckRange(device, dst, bytes, "UnshuffleAsync dst"));
    RCKPT_RETURN_IF_ERROR(CheckRange(device, src, bytes, "UnshuffleAsync src"));
    state->Enqueue([this, dst, src, bytes, elem_size] {
      ++unshuffles_;
      UnshuffleBytes({static_cast<const std::byte*>(src), bytes},
                     {static_cast<std::byte*>(dst), bytes}, elem_size);
      return Status::Ok();
    });
    return Status::Ok();
  }

  Result<Event> RecordEvent(Device device, Stream stream) override {
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    auto event = std::make_unique<EventState>();
    event->stream = state;
    event->seq = state->Submitted();
    std::lock_guard<std::mutex> lock(mu_);
    void* handle = event.get();
    events_[handle] = std::move(event);
    return Event{handle};
  }

  Status StreamWaitEvent(Device device, Stream stream, Event event) override {
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    std::shared_ptr<StreamState> waited;
    uint64_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = events_.find(event.handle);
      if (it == events_.end()) {
        return Status::DeviceError("StreamWaitEvent: unknown event");
      }
      if (it->second->stream->device != device.index) {
        return Status::DeviceError("StreamWaitEvent: an event of cuda:" +
                                   std::to_string(it->second->stream->device) +
                                   " waited for on " + device.ToString());
      }
      waited = it->second->stream;
      seq = it->second->seq;
    }
    // The waiting stream does not inherit the other stream's error, as in
    // CUDA; only the ordering.
    state->Enqueue([waited, seq] {
      (void)waited->WaitFor(seq);
      return Status::Ok();
    });
    return Status::Ok();
  }

  Status WaitEvent(Event event) override {
    std::shared_ptr<StreamState> stream;
    uint64_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = events_.find(event.handle);
      if (it == events_.end()) {
        return Status::DeviceError("WaitEvent: unknown event");
      }
      stream = it->second->stream;
      seq = it->second->seq;
    }
    return stream->WaitFor(seq);
  }

  void DestroyEvent(Event event) override {
    std::unique_ptr<EventState> doomed;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = events_.find(event.handle);
    if (it == events_.end()) return;
    doomed = std::move(it->second);
    events_.erase(it);
  }

  Status Synchronize(Device device, Stream stream) override {
    RCKPT_ASSIGN_OR_RETURN(auto state, FindStream(device, stream));
    return state->WaitFor(state->Submitted());
  }

  int LiveAllocations(int device) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (device < 0 || device >= options_.device_count) return 0;
    return static_cast<int>(allocs_[device].size());
  }
  uint64_t LiveBytes(int device) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (device < 0 || device >= options_.device_count) return 0;
    return live_bytes_[device];
  }
  int LivePinned() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(pinned_.size());
  }
  int LiveStreams() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(streams_.size());
  }
  int LiveEvents() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(events_.size());
  }
  int BadFrees() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_frees_;
  }
  std::optional<int> DeviceOf(const void* ptr) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (int d = 0; d < options_.device_count; ++d) {
      if (FindAllocLocked(d, ptr, 0)) return d;
    }
    return std::nullopt;
  }
  uint64_t CopiesExecuted() const override { return copies_.load(); }
  uint64_t UnshufflesExecuted() const override { return unshuffles_.load(); }

 private:
  Status CheckDevice(Device device, std::string_view what) const {
    if (!device.is_cuda()) {
      return Status::InvalidArgument(std::string(what) + ": device " +
                                     device.ToString() +
                                     " is not a CUDA device");
    }
    if (device.index < 0 || device.index >= options_.device_count) {
      return Status::DeviceUnavailable(
          std::string(what) + ": device " + device.ToString() +
          " does not exist (" + name_ + " has " +
          std::to_string(options_.device_count) + " CUDA devices)");
    }
    return Status::Ok();
  }

  // True when [ptr, ptr + bytes) lies inside one live allocation of `device`.
  bool FindAllocLocked(int device, const void* ptr, uint64_t bytes) const {
    const auto& dev = allocs_[device];
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = dev.upper_bound(p);
    if (it == dev.begin()) return false;
    --it;
    uint64_t off = p - it->first;
    if (bytes == 0) return off < std::max<uint64_t>(it->second, 1);
    return off < it->second && bytes <= it->second - off;
  }

  Status CheckRange(Device device, const void* ptr, uint64_t bytes,
                    std::string_view what) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes == 0 && ptr == nullptr) return Status::Ok();
    if (!FindAllocLocked(device.index, ptr, bytes)) {
      return Status::DeviceError(
          std::string(what) + ": " + std::to_string(bytes) +
          " bytes are not inside an allocation of " + device.ToString());
    }
    return Status::Ok();
  }

  Result<std::shared_ptr<StreamState>> FindStream(Device device,
                                                  Stream stream) {
    RCKPT_RETURN_IF_ERROR(CheckDevice(device, "stream operation"));
    std::lock_guard<std::mutex> lock(mu_);
    if (stream.handle == nullptr) {
      std::shared_ptr<StreamState>& d = default_streams_[device.index];
      if (d == nullptr) d = std::make_shared<StreamState>(device.index);
      return d;
    }
    auto it = streams_.find(stream.handle);
    if (it == streams_.end()) {
      return Status::DeviceError("unknown stream on " + device.ToString());
    }
    if (it->second->device != device.index) {
      return Status::DeviceError(
          "stream of cuda:" + std::to_string(it->second->device) +
          " used for " + device.ToString());
    }
    return it->second;
  }

  Status RunCopy(void* dst, const void* src, uint64_t bytes) {
    uint64_t n = ++copies_;
    if (options_.fail_after_copies > 0 &&
        n == static_cast<uint64_t>(options_.fail_after_copies)) {
      return Status::DeviceError("emulated copy " + std::to_string(n) +
                                 " failed (injected)");
    }
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }

  const EmulatedRuntimeOptions options_;
  const std::string name_;
  mutable std::mutex mu_;
  std::vector<std::map<uintptr_t, uint64_t>> allocs_;
  std::vector<uint64_t> live_bytes_;
  std::set<void*> pinned_;
  std::map<void*, std::shared_ptr<StreamState>> streams_;
  std::map<int, std::shared_ptr<StreamState>> default_streams_;
  std::map<void*, std::unique_ptr<EventState>> events_;
  int bad_frees_ = 0;
  std::atomic<uint64_t> copies_{0};
  std::atomic<uint64_t> unshuffles_{0};
  // Each thread's current device, per runtime. Keyed by a number no later
  // runtime reuses: the destructor erases only its own thread's entry, and
  // a runtime made at the same address must not find another thread's.
  static inline std::atomic<uint64_t> next_id_{0};
  const uint64_t id_ = next_id_++;
  static thread_local std::map<uint64_t, int> current_device_;
  DevicePool pool_{*this, kDefaultPinnedPoolBytes};
};

thread_local std::map<uint64_t, int> EmulatedRuntimeImpl::current_device_;

}  // namespace

std::unique_ptr<EmulatedRuntime> NewEmulatedRuntimeForTesting(
    const EmulatedRuntimeOptions& options) {
  return std::make_unique<EmulatedRuntimeImpl>(options);
}

std::unique_ptr<DeviceRuntime> NewEmulatedRuntime(int device_count) {
  EmulatedRuntimeOptions options;
  options.device_count = device_count < 0 ? 0 : device_count;
  return NewEmulatedRuntimeForTesting(options);
}

}  // namespace rckpt
