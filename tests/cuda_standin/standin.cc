// The stand-in CUDA driver (standin_control.h): the driver API subset rckpt
// resolves, over host memory. Device pointers are host pointers of tracked
// allocations; every stream is a worker thread running its operations in
// order, each some time after it was enqueued; kernels run through the
// host-compiled kernel source (kernel_host.h).
#include <xxhash.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "driver_api.h"
#include "kernel_host.h"
#include "standin_control.h"
#include "unshuffle_params.h"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

using namespace rckpt::cuda;  // NOLINT: the driver ABI's names

namespace {

constexpr int kMaxDevices = 8;
constexpr CUdevice kDeviceBase = 100;  // CUdevice != ordinal: catches mixing them up
constexpr std::align_val_t kAlign{256};

struct Context {
  int device = 0;
  std::atomic<CUresult> sticky{kSuccess};  // once set, every call in the context fails with it
};

struct StreamState;

// One queued operation; returns its error (kSuccess).
using Op = std::function<CUresult()>;

// Blocks while `device` is held (rckpt_standin_hold_device).
void WaitWhileDeviceHeld(int device);

struct StreamState {
  // `legacy`: the device's default stream. `blocking`: a stream made without
  // CU_STREAM_NON_BLOCKING, which synchronises with the legacy one.
  StreamState(int dev, int delay_us, bool is_legacy = false, bool is_blocking = false)
      : device(dev), delay(delay_us), legacy(is_legacy), blocking(is_blocking) {
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
  uint64_t Enqueue(Op op) {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(std::move(op));
    cv.notify_all();
    return ++submitted;
  }
  uint64_t Submitted() {
    std::lock_guard<std::mutex> lock(mu);
    return submitted;
  }
  // Waits until `seq` operations ran; the first error at or before it.
  CUresult WaitFor(uint64_t seq) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return completed >= seq; });
    return error_seq <= seq ? error : kSuccess;
  }
  void Work() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Op op = std::move(queue.front());
      queue.pop_front();
      const bool skip = error != kSuccess;
      lock.unlock();
      if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
      WaitWhileDeviceHeld(device);
      const CUresult r = skip ? kSuccess : op();
      op = nullptr;  // what it kept in use is free before the op counts as run
      lock.lock();
      ++completed;
      if (r != kSuccess && error == kSuccess) {
        error = r;
        error_seq = completed;
      }
      cv.notify_all();
    }
  }

  const int device;
  const int delay;
  const bool legacy;
  const bool blocking;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Op> queue;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  CUresult error = kSuccess;
  uint64_t error_seq = UINT64_MAX;
  bool stop = false;
  std::thread worker;
};

struct EventState {
  int device = 0;
  std::shared_ptr<StreamState> stream;  // null until recorded
  uint64_t seq = 0;
};

struct ModuleState {
  int device = 0;
};
// Function handles: the address of one of these names.
const char* const kFunctions[] = {kUnshuffleTiledKernel, kUnshuffleGenericKernel};

class Standin {
 public:
  static Standin& Get() {
    static Standin* s = new Standin();  // lives until exit's check
    return *s;
  }

  std::mutex mu;
  RckptStandinConfig config;
  bool initialised = false;
  std::map<uintptr_t, uint64_t> allocs[kMaxDevices];
  uint64_t live_bytes[kMaxDevices] = {};
  std::set<void*> pinned;
  std::map<CUstream, std::shared_ptr<StreamState>> streams;
  std::shared_ptr<StreamState> default_streams[kMaxDevices];
  std::map<CUevent, std::unique_ptr<EventState>> events;
  std::map<CUmodule, std::unique_ptr<ModuleState>> modules;
  Context primary[kMaxDevices];
  int retained[kMaxDevices] = {};
  uint64_t retains_ever[kMaxDevices] = {};
  uint64_t allocations_made = 0;
  std::atomic<uint64_t> copies{0};
  std::atomic<uint64_t> launches{0};
  int bad_frees = 0;
  std::atomic<int> init_calls{0};
  std::atomic<uint64_t> mem_host_allocs{0}, mem_allocs{0}, mem_frees{0}, mem_host_frees{0},
      stream_creates{0}, event_creates{0}, ctx_syncs{0}, stream_syncs{0}, event_records{0},
      htod_pinned{0}, htod_pageable{0}, dtoh_pinned{0}, dtoh_pageable{0};
  std::map<uintptr_t, uint64_t> pinned_sizes;  // pinned block -> its bytes
  // Host and device ranges queued copies still read or write (begin -> end),
  // under uses_mu: a free of memory in it is a violation.
  std::mutex uses_mu;
  struct Use {
    uintptr_t end;
    const Context* context;  // its operation's: a faulted context runs nothing more
  };
  std::multimap<uintptr_t, Use> uses;
  // Memory freed while a copy still used it: kept, so the copy does no harm.
  std::vector<std::pair<void*, bool>> freed_in_use;  // (memory, pinned)
  std::vector<std::shared_ptr<StreamState>> destroyed_busy;  // destroyed with work queued
  // Valid while held; under gate_mu, which a stream's worker takes (never
  // mu: a stream may be destroyed, and its worker joined, under mu).
  std::mutex gate_mu;
  std::shared_future<void> device_gate[kMaxDevices];
  pid_t init_pid = 0;  // the process that called cuInit
  // Handles a device reset destroyed: using them is an error, not a violation.
  std::set<const void*> reset_handles;
  // What a reset destroyed, kept so that no later stream, event, module or
  // allocation gets the same handle while a stale one may still be checked:
  // a test of reset detection must see the stale handle stale, not a
  // namesake on another device.
  std::vector<std::shared_ptr<void>> reset_objects;
  std::vector<void*> reset_memory;
  std::map<void*, int> pinned_device;  // pinned block -> the device whose context made it
  std::vector<std::string> violations;

  void Violation(std::string what) {
    std::lock_guard<std::mutex> lock(violation_mu);
    violations.push_back(std::move(what));
  }

  int Devices() {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    if (v != nullptr && v[0] == '\0') return 0;
    return std::min(config.devices, kMaxDevices);
  }

  void Reset(const RckptStandinConfig& c) {
    std::lock_guard<std::mutex> lock(mu);
    config = c;
    for (auto& a : allocs) a.clear();
    for (auto& b : live_bytes) b = 0;
    pinned.clear();
    streams.clear();
    for (auto& d : default_streams) d.reset();
    events.clear();
    modules.clear();
    for (int i = 0; i < kMaxDevices; ++i) {
      primary[i].device = i;
      primary[i].sticky = kSuccess;
      retained[i] = 0;
      retains_ever[i] = 0;
    }
    allocations_made = 0;
    for (auto* c : {&mem_host_allocs, &mem_allocs, &mem_frees, &mem_host_frees, &stream_creates,
                    &event_creates, &ctx_syncs, &stream_syncs, &event_records, &htod_pinned,
                    &htod_pageable, &dtoh_pinned, &dtoh_pageable}) {
      *c = 0;
    }
    pinned_sizes.clear();
    destroyed_busy.clear();
    std::lock_guard<std::mutex> glock(gate_mu);
    for (auto& g : device_gate) g = {};
    reset_handles.clear();
    pinned_device.clear();
    copies = 0;
    launches = 0;
    bad_frees = 0;
    init_calls = 0;
    std::lock_guard<std::mutex> vlock(violation_mu);
    violations.clear();
  }

  // The device whose live allocation holds [p, p + n); -1 when none does.
  int DeviceOfLocked(const void* p, uint64_t n) const {
    const uintptr_t q = reinterpret_cast<uintptr_t>(p);
    for (int d = 0; d < kMaxDevices; ++d) {
      auto it = allocs[d].upper_bound(q);
      if (it == allocs[d].begin()) continue;
      --it;
      const uint64_t off = q - it->first;
      if (off < std::max<uint64_t>(it->second, 1) && n <= it->second - std::min(off, it->second)) {
        return d;
      }
    }
    return -1;
  }

  // Whether [p, p + n) lies in one pinned block.
  bool PinnedLocked(const void* p, uint64_t n) const {
    const uintptr_t q = reinterpret_cast<uintptr_t>(p);
    auto it = pinned_sizes.upper_bound(q);
    if (it == pinned_sizes.begin()) return false;
    --it;
    return q - it->first < std::max<uint64_t>(it->second, 1) && n <= it->second - (q - it->first);
  }

  // Whether a queued copy still reads or writes [p, p + n).
  bool InUse(const void* p, uint64_t n) {
    const uintptr_t q = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(uses_mu);
    for (auto it = uses.begin(); it != uses.end() && it->first < q + std::max<uint64_t>(n, 1);
         ++it) {
      if (it->second.end > q && it->second.context->sticky == kSuccess) return true;
    }
    return false;
  }

  std::mutex violation_mu;

 private:
  Standin() {
    auto env = [](const char* name, int fallback) {
      const char* v = std::getenv(name);
      return v != nullptr && v[0] != '\0' ? std::atoi(v) : fallback;
    };
    config.devices = env("RCKPT_STANDIN_DEVICES", config.devices);
    config.driver_version = env("RCKPT_STANDIN_DRIVER_VERSION", config.driver_version);
    config.init_error = env("RCKPT_STANDIN_INIT_ERROR", 0);
    config.kernel_load_error = env("RCKPT_STANDIN_KERNEL_ERROR", 0);
    config.mig = env("RCKPT_STANDIN_MIG", 0);
    if (const char* m = std::getenv("RCKPT_STANDIN_MEMORY")) config.memory_bytes = std::strtoull(m, nullptr, 10);
    for (int i = 0; i < kMaxDevices; ++i) primary[i].device = i;
  }
};

Standin& S() { return Standin::Get(); }

void WaitWhileDeviceHeld(int device) {
  std::shared_future<void> gate;
  {
    Standin& st = S();
    std::lock_guard<std::mutex> lock(st.gate_mu);
    gate = st.device_gate[device];
  }
  if (gate.valid()) gate.wait();
}

// Ranges a queued operation reads or writes, registered until it has run
// (or was skipped): freeing memory in them is a violation.
class PendingUse {
 public:
  PendingUse(const Context* context,
             std::initializer_list<std::pair<const void*, uint64_t>> ranges) {
    Standin& st = S();
    std::lock_guard<std::mutex> lock(st.uses_mu);
    for (const auto& [p, n] : ranges) {
      const uintptr_t q = reinterpret_cast<uintptr_t>(p);
      its_.push_back(st.uses.emplace(q, Standin::Use{q + std::max<uint64_t>(n, 1), context}));
    }
  }
  ~PendingUse() {
    Standin& st = S();
    std::lock_guard<std::mutex> lock(st.uses_mu);
    for (auto it : its_) st.uses.erase(it);
  }
  PendingUse(const PendingUse&) = delete;
  PendingUse& operator=(const PendingUse&) = delete;

 private:
  std::vector<std::multimap<uintptr_t, Standin::Use>::iterator> its_;
};

// Queues `op` on `stream` as a driver orders it: work on a blocking stream
// (made without CU_STREAM_NON_BLOCKING) runs after what the device's legacy
// default stream was given before it, and work on the legacy stream after
// what every blocking stream of the device was given before it.
// Non-blocking streams order against nothing but events.
void Submit(const std::shared_ptr<StreamState>& stream, Op op) {
  Standin& st = S();
  std::vector<std::pair<std::shared_ptr<StreamState>, uint64_t>> after;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (stream->legacy) {
      for (const auto& [h, other] : st.streams) {
        if (other->device == stream->device && other->blocking) after.emplace_back(other, 0);
      }
    } else if (stream->blocking && st.default_streams[stream->device] != nullptr) {
      after.emplace_back(st.default_streams[stream->device], 0);
    }
  }
  for (auto& [other, seq] : after) seq = other->Submitted();
  if (after.empty()) {
    stream->Enqueue(std::move(op));
    return;
  }
  stream->Enqueue([after = std::move(after), op = std::move(op)] {
    for (const auto& [other, seq] : after) (void)other->WaitFor(seq);
    return op();
  });
}

// A thread's stack of current contexts, in storage that stays valid after
// the thread's destructors ran: the main thread's thread_local objects are
// destroyed before the process's exit handlers run, and a library's exit
// handler may still make driver calls (rckpt releases its pool there).
class FixedStack {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  Context*& back() { return items_[size_ - 1]; }
  void push_back(Context* c) {
    if (size_ < kDepth) items_[size_++] = c;
  }
  void pop_back() { --size_; }

 private:
  static constexpr size_t kDepth = 64;
  Context* items_[kDepth] = {};
  size_t size_ = 0;
};

// The calling thread's context stack; a thread that ends with contexts
// still pushed has leaked them.
struct ContextStack {
  FixedStack stack;
  ~ContextStack() {
    if (!stack.empty()) {
      S().Violation("a thread ended with " + std::to_string(stack.size()) +
                    " context(s) still pushed (a cuCtxPushCurrent without its pop)");
    }
  }
};
thread_local ContextStack tls_contexts;

Context* Current() { return tls_contexts.stack.empty() ? nullptr : tls_contexts.stack.back(); }

// A child forked after cuInit cannot use CUDA: every call fails.
bool Forked() {
  const pid_t p = S().init_pid;
  return p != 0 && p != getpid();
}

// The current context, or a violation: every call below needs one, as the
// real driver's do.
CUresult NeedContext(const char* call, Context** out) {
  if (Forked()) return kErrorNotInitialized;
  Context* c = Current();
  if (c == nullptr) {
    S().Violation(std::string(call) + " without a current context");
    return kErrorInvalidContext;
  }
  if (c->sticky != kSuccess) return c->sticky;
  *out = c;
  return kSuccess;
}

std::shared_ptr<StreamState> StreamFor(CUstream s, Context* ctx, const char* call, CUresult* err) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (s == nullptr) {
    auto& d = st.default_streams[ctx->device];
    if (d == nullptr) {
      d = std::make_shared<StreamState>(ctx->device, st.config.copy_delay_us, /*is_legacy=*/true);
    }
    return d;
  }
  auto it = st.streams.find(s);
  if (it == st.streams.end()) {
    if (st.reset_handles.count(s) == 0) {
      st.Violation(std::string(call) + ": unknown or destroyed stream");
    }
    *err = kErrorInvalidHandle;
    return nullptr;
  }
  if (it->second->device != ctx->device) {
    st.Violation(std::string(call) + ": a stream of cuda:" + std::to_string(it->second->device) +
                 " used while cuda:" + std::to_string(ctx->device) + " is current");
    *err = kErrorInvalidHandle;
    return nullptr;
  }
  return it->second;
}

// Checks that [p, p + n) is device memory of `device`.
CUresult CheckDevicePtr(const char* call, const void* p, uint64_t n, int device) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  const int d = st.DeviceOfLocked(p, n);
  if (d == device) return kSuccess;
  st.Violation(std::string(call) + ": " + std::to_string(n) + " bytes at " +
               std::to_string(reinterpret_cast<uintptr_t>(p)) +
               (d < 0 ? " are not device memory" : " are memory of cuda:" + std::to_string(d)) +
               " (the stream's device is cuda:" + std::to_string(device) + ")");
  return kErrorInvalidValue;
}

// Counts a copy and applies the injected copy faults to its context.
CUresult CountCopy(Context* ctx) {
  Standin& st = S();
  if (ctx->sticky != kSuccess) return ctx->sticky;  // a dead context runs nothing
  const uint64_t n = ++st.copies;
  if (st.config.sticky_copy > 0 && n == static_cast<uint64_t>(st.config.sticky_copy)) {
    ctx->sticky = kErrorIllegalAddress;
    return kErrorIllegalAddress;
  }
  if (st.config.fail_copy > 0 && n == static_cast<uint64_t>(st.config.fail_copy)) {
    ctx->sticky = kErrorLaunchFailed;  // as a driver's: the context is done for
    return kErrorLaunchFailed;
  }
  return kSuccess;
}

uint64_t Hash(const void* p, size_t n) { return n == 0 ? 0 : XXH3_64bits(p, n); }

// What cuMemFree, cuMemFreeHost and cuCtxSynchronize do on a real device:
// wait until every stream of the context has run what was queued on it.
void WaitForDevice(int device) {
  Standin& st = S();
  std::vector<std::pair<std::shared_ptr<StreamState>, uint64_t>> pending;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    for (const auto& [h, s] : st.streams) {
      if (s->device == device) pending.emplace_back(s, 0);
    }
    if (st.default_streams[device] != nullptr) pending.emplace_back(st.default_streams[device], 0);
  }
  for (auto& [s, seq] : pending) seq = s->Submitted();
  for (auto& [s, seq] : pending) (void)s->WaitFor(seq);
}

}  // namespace

// ---- The driver API ----

STANDIN_EXPORT CUresult cuDriverGetVersion(int* v) {
  *v = S().config.driver_version;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuGetErrorName(CUresult e, const char** name) {
  switch (e) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kErrorInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kErrorOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case kErrorNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case kErrorNoDevice: *name = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case kErrorInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case kErrorInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kErrorInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case kErrorNoBinaryForGpu: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return kSuccess;
    case kErrorUnsupportedPtxVersion: *name = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; return kSuccess;
    case kErrorInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case kErrorNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    case kErrorIllegalAddress: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kSuccess;
    case kErrorLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
    case kErrorSystemDriverMismatch: *name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return kSuccess;
    case kErrorUnknown: *name = "CUDA_ERROR_UNKNOWN"; return kSuccess;
    default: *name = nullptr; return kErrorInvalidValue;
  }
}

STANDIN_EXPORT CUresult cuGetErrorString(CUresult e, const char** text) {
  // An injected fault says so, as the emulated runtime's do.
  *text = e == kSuccess ? "no error" : "a fault of the stand-in driver (injected)";
  return kSuccess;
}

STANDIN_EXPORT CUresult cuInit(unsigned flags) {
  Standin& st = S();
  ++st.init_calls;
  if (Forked()) return kErrorNotInitialized;
  if (flags != 0) return kErrorInvalidValue;
  if (st.config.init_error != 0) return st.config.init_error;
  if (st.Devices() == 0) return kErrorNoDevice;
  std::lock_guard<std::mutex> lock(st.mu);
  st.initialised = true;
  if (st.init_pid == 0) st.init_pid = getpid();
  return kSuccess;
}

namespace {
CUresult NeedInit() {
  if (Forked()) return kErrorNotInitialized;
  return S().initialised ? kSuccess : kErrorNotInitialized;
}
CUresult Ordinal(CUdevice d, int* ordinal) {
  if (CUresult r = NeedInit(); r != kSuccess) return r;
  const int o = d - kDeviceBase;
  if (o < 0 || o >= S().Devices()) return kErrorInvalidDevice;
  *ordinal = o;
  return kSuccess;
}
}  // namespace

STANDIN_EXPORT CUresult cuDeviceGetCount(int* n) {
  if (CUresult r = NeedInit(); r != kSuccess) return r;
  *n = S().Devices();
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (CUresult r = NeedInit(); r != kSuccess) return r;
  if (ordinal < 0 || ordinal >= S().Devices()) return kErrorInvalidDevice;
  *d = kDeviceBase + ordinal;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  std::snprintf(name, len, S().config.mig ? "rckpt stand-in GPU MIG 1g.%dgb" : "rckpt stand-in GPU",
                static_cast<int>(S().config.memory_bytes >> 30));
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* u, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  for (int i = 0; i < 16; ++i) u->bytes[i] = static_cast<char>(0x10 * (o + 1) + i);
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  *bytes = S().config.memory_bytes;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  std::snprintf(id, len, "0000:%02X:00.0", S().config.mig ? 0x1a : 0x1a + o);
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDeviceGetAttribute(int* v, int attribute, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  if (attribute == kDeviceAttributeComputeCapabilityMajor) *v = 9;
  else if (attribute == kDeviceAttributeComputeCapabilityMinor) *v = 0;
  else return kErrorInvalidValue;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  Standin& st = S();
  if (st.config.retain_error != 0) return st.config.retain_error;
  std::lock_guard<std::mutex> lock(st.mu);
  ++st.retained[o];
  ++st.retains_ever[o];
  *ctx = reinterpret_cast<CUcontext>(&st.primary[o]);
  return kSuccess;
}

STANDIN_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  int o = 0;
  if (CUresult r = Ordinal(d, &o); r != kSuccess) return r;
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.retained[o] == 0) {
    st.Violation("cuDevicePrimaryCtxRelease of cuda:" + std::to_string(o) + " without a retain");
    return kErrorInvalidContext;
  }
  // The last release destroys the primary context: a fault ends with it.
  if (--st.retained[o] == 0) st.primary[o].sticky = kSuccess;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (Forked()) return kErrorNotInitialized;
  if (ctx == nullptr) return kErrorInvalidContext;
  tls_contexts.stack.push_back(reinterpret_cast<Context*>(ctx));
  return kSuccess;
}

STANDIN_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (tls_contexts.stack.empty()) {
    S().Violation("cuCtxPopCurrent with no current context");
    return kErrorInvalidContext;
  }
  Context* c = tls_contexts.stack.back();
  tls_contexts.stack.pop_back();
  if (ctx != nullptr) *ctx = reinterpret_cast<CUcontext>(c);
  return kSuccess;
}

STANDIN_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(Current());
  return kSuccess;
}

STANDIN_EXPORT CUresult cuCtxGetDevice(CUdevice* d) {
  Context* c = Current();
  if (c == nullptr) return kErrorInvalidContext;
  *d = kDeviceBase + c->device;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  Context* c = nullptr;
  ++S().mem_allocs;
  if (CUresult r = NeedContext("cuMemAlloc", &c); r != kSuccess) return r;
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  ++st.allocations_made;
  if (bytes == 0) return kErrorInvalidValue;
  if ((st.config.oom_after_allocs > 0 &&
       st.allocations_made >= static_cast<uint64_t>(st.config.oom_after_allocs)) ||
      bytes > st.config.memory_bytes - st.live_bytes[c->device]) {
    return kErrorOutOfMemory;
  }
  void* p = ::operator new(bytes, kAlign, std::nothrow);
  if (p == nullptr) return kErrorOutOfMemory;
  std::memset(p, 0xEE, bytes);  // not zero: a load must write every byte
  st.allocs[c->device][reinterpret_cast<uintptr_t>(p)] = bytes;
  st.live_bytes[c->device] += bytes;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  ++S().mem_frees;
  if (Forked()) return kErrorNotInitialized;
  Context* c = Current();
  if (c == nullptr) {
    S().Violation("cuMemFree without a current context");
    return kErrorInvalidContext;
  }
  // No wait for the device's streams: a real driver need not wait, so
  // memory a queued copy still uses is freed under it.
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  auto& dev = st.allocs[c->device];
  auto it = dev.find(static_cast<uintptr_t>(ptr));
  if (it == dev.end()) {
    if (st.reset_handles.count(reinterpret_cast<const void*>(ptr)) != 0) return kErrorInvalidValue;
    ++st.bad_frees;
    st.Violation("cuMemFree of " + std::to_string(ptr) + ", not an allocation of cuda:" +
                 std::to_string(c->device));
    return kErrorInvalidValue;
  }
  st.live_bytes[c->device] -= it->second;
  if (st.InUse(reinterpret_cast<void*>(it->first), it->second)) {
    st.Violation("cuMemFree of " + std::to_string(it->second) + " bytes of cuda:" +
                 std::to_string(c->device) +
                 " that a queued copy still uses: the driver does not wait for it (free "
                 "only after the copy's event, or keep the memory)");
    st.freed_in_use.emplace_back(reinterpret_cast<void*>(it->first), false);
  } else {
    ::operator delete(reinterpret_cast<void*>(it->first), kAlign);
  }
  dev.erase(it);
  // The real driver frees but keeps failing in a faulted context.
  return c->sticky.load();
}

STANDIN_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  Context* c = nullptr;
  ++S().mem_host_allocs;
  if (CUresult r = NeedContext("cuMemHostAlloc", &c); r != kSuccess) return r;
  Standin& st = S();
  if (st.config.pinned_error != 0) return st.config.pinned_error;
  if ((flags & kMemHostAllocPortable) == 0) {
    st.Violation("cuMemHostAlloc without CU_MEMHOSTALLOC_PORTABLE: only the allocating context "
                 "may copy from it");
  }
  void* q = ::operator new(bytes == 0 ? 1 : bytes, kAlign, std::nothrow);
  if (q == nullptr) return kErrorOutOfMemory;
  std::lock_guard<std::mutex> lock(st.mu);
  st.pinned.insert(q);
  st.pinned_sizes[reinterpret_cast<uintptr_t>(q)] = bytes;
  st.pinned_device[q] = c->device;
  *p = q;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemFreeHost(void* p) {
  ++S().mem_host_frees;
  if (Forked()) return kErrorNotInitialized;
  Context* c = Current();
  if (c == nullptr) {
    S().Violation("cuMemFreeHost without a current context");
    return kErrorInvalidContext;
  }
  // No wait for the device's streams (see cuMemFree).
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  st.pinned_device.erase(p);
  if (st.pinned.erase(p) == 0) {
    if (st.reset_handles.count(p) != 0) return kErrorInvalidValue;
    ++st.bad_frees;
    st.Violation("cuMemFreeHost of memory cuMemHostAlloc did not make");
    return kErrorInvalidValue;
  }
  const auto size = st.pinned_sizes.find(reinterpret_cast<uintptr_t>(p));
  const uint64_t bytes = size != st.pinned_sizes.end() ? size->second : 1;
  if (size != st.pinned_sizes.end()) st.pinned_sizes.erase(size);
  if (st.InUse(p, bytes)) {
    st.Violation("cuMemFreeHost of " + std::to_string(bytes) +
                 " bytes of pinned memory that a queued copy still uses: the driver does not "
                 "wait for it (free only after the copy's event, or keep the memory)");
    st.freed_in_use.emplace_back(p, true);
  } else {
    ::operator delete(p, kAlign);
  }
  return c->sticky.load();  // freed, and still failing in a faulted context
}

STANDIN_EXPORT CUresult cuMemHostGetFlags(unsigned* flags, void* p) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuMemHostGetFlags", &c); r != kSuccess) return r;
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.pinned.count(p) == 0) return kErrorInvalidValue;
  *flags = kMemHostAllocPortable;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* bytes, CUdeviceptr p) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuMemGetAddressRange", &c); r != kSuccess) return r;
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto& dev = st.allocs[c->device];
  auto it = dev.upper_bound(static_cast<uintptr_t>(p));
  if (it == dev.begin()) return kErrorNotFound;
  --it;
  if (p - it->first >= std::max<uint64_t>(it->second, 1)) return kErrorNotFound;
  if (base != nullptr) *base = it->first;
  if (bytes != nullptr) *bytes = it->second;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned flags) {
  Context* c = nullptr;
  ++S().stream_creates;
  if (CUresult r = NeedContext("cuStreamCreate", &c); r != kSuccess) return r;
  if ((flags & ~kStreamNonBlocking) != 0) return kErrorInvalidValue;
  Standin& st = S();
  auto state = std::make_shared<StreamState>(c->device, st.config.copy_delay_us,
                                             /*is_legacy=*/false,
                                             /*is_blocking=*/(flags & kStreamNonBlocking) == 0);
  std::lock_guard<std::mutex> lock(st.mu);
  CUstream h = reinterpret_cast<CUstream>(state.get());
  st.streams[h] = std::move(state);
  *s = h;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuStreamDestroy", &c); r != kSuccess) {
    // A faulted context still lets its streams go.
    c = Current();
    if (c == nullptr || r != c->sticky) return r;
  }
  Standin& st = S();
  std::shared_ptr<StreamState> doomed;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.streams.find(s);
    if (it == st.streams.end()) {
      if (st.reset_handles.count(s) == 0) st.Violation("cuStreamDestroy of an unknown stream");
      return kErrorInvalidHandle;
    }
    if (c != nullptr && it->second->device != c->device) {
      st.Violation("cuStreamDestroy of a stream of cuda:" + std::to_string(it->second->device) +
                   " while cuda:" + std::to_string(c->device) + " is current");
    }
    doomed = std::move(it->second);
    st.streams.erase(it);
    // As a driver's, the call returns at once: work still queued (behind a
    // held stream or device) finishes on its worker, kept until the next
    // configure.
    std::lock_guard<std::mutex> slock(doomed->mu);
    if (doomed->completed < doomed->submitted) st.destroyed_busy.push_back(doomed);
  }
  return kSuccess;
}

STANDIN_EXPORT CUresult cuCtxSynchronize() {
  ++S().ctx_syncs;
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuCtxSynchronize", &c); r != kSuccess) return r;
  WaitForDevice(c->device);
  return c->sticky.load();
}

STANDIN_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  ++S().stream_syncs;
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuStreamSynchronize", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuStreamSynchronize", &err);
  if (state == nullptr) return err;
  if (S().config.stream_sync_error != 0) return S().config.stream_sync_error;
  const CUresult r = state->WaitFor(state->Submitted());
  return c->sticky != kSuccess ? c->sticky.load() : r;
}

STANDIN_EXPORT CUresult cuStreamQuery(CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuStreamQuery", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuStreamQuery", &err);
  if (state == nullptr) return err;
  std::lock_guard<std::mutex> lock(state->mu);
  return state->completed >= state->submitted ? kSuccess : kErrorNotReady;
}

STANDIN_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuStreamWaitEvent", &c); r != kSuccess) return r;
  if (flags != 0) return kErrorInvalidValue;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuStreamWaitEvent", &err);
  if (state == nullptr) return err;
  Standin& st = S();
  std::shared_ptr<StreamState> waited;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.events.find(e);
    if (it == st.events.end()) {
      if (st.reset_handles.count(e) == 0) {
        st.Violation("cuStreamWaitEvent on an unknown or destroyed event");
      }
      return kErrorInvalidHandle;
    }
    waited = it->second->stream;
    seq = it->second->seq;
  }
  if (waited == nullptr) return kSuccess;  // never recorded: nothing to wait for
  Submit(state, [waited, seq] {
    (void)waited->WaitFor(seq);
    return kSuccess;
  });
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                             CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuMemcpyHtoDAsync", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuMemcpyHtoDAsync", &err);
  if (state == nullptr) return err;
  void* d = reinterpret_cast<void*>(dst);
  if (CUresult r = CheckDevicePtr("cuMemcpyHtoDAsync dst", d, n, c->device); r != kSuccess) return r;
  // The source must not change until the copy has run: a staging slot
  // refilled too early shows here.
  const uint64_t before = Hash(src, n);
  {
    Standin& st = S();
    std::lock_guard<std::mutex> lock(st.mu);
    ++(st.PinnedLocked(src, n) ? st.htod_pinned : st.htod_pageable);
  }
  auto use = std::make_shared<PendingUse>(
      c, std::initializer_list<std::pair<const void*, uint64_t>>{{src, n}, {d, n}});
  Submit(state, [c, d, src, n, before, use] {
    if (CUresult r = CountCopy(c); r != kSuccess) return r;
    if (Hash(src, n) != before) {
      S().Violation("the host source of a pending host-to-device copy (" + std::to_string(n) +
                    " bytes) changed before the copy ran: a staging buffer was reused too early");
    }
    std::memcpy(d, src, n);
    return kSuccess;
  });
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuMemcpyDtoHAsync", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuMemcpyDtoHAsync", &err);
  if (state == nullptr) return err;
  const void* from = reinterpret_cast<const void*>(src);
  if (CUresult r = CheckDevicePtr("cuMemcpyDtoHAsync src", from, n, c->device); r != kSuccess) {
    return r;
  }
  // The copy lands in two steps, as a DMA in progress does: the destination
  // holds a pattern for a while before it holds the bytes, so whoever reads
  // it without waiting for the copy's event reads the pattern.
  const int delay = S().config.copy_delay_us;
  {
    Standin& st = S();
    std::lock_guard<std::mutex> lock(st.mu);
    ++(st.PinnedLocked(dst, n) ? st.dtoh_pinned : st.dtoh_pageable);
  }
  auto use = std::make_shared<PendingUse>(
      c, std::initializer_list<std::pair<const void*, uint64_t>>{{dst, n}, {from, n}});
  Submit(state, [c, dst, from, n, delay, use] {
    if (CUresult r = CountCopy(c); r != kSuccess) return r;
    std::memset(dst, 0xA5, n);
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    std::memcpy(dst, from, n);
    return kSuccess;
  });
  return kSuccess;
}

STANDIN_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                             CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuMemcpyDtoDAsync", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuMemcpyDtoDAsync", &err);
  if (state == nullptr) return err;
  void* d = reinterpret_cast<void*>(dst);
  const void* f = reinterpret_cast<const void*>(src);
  if (CUresult r = CheckDevicePtr("cuMemcpyDtoDAsync dst", d, n, c->device); r != kSuccess) return r;
  if (CUresult r = CheckDevicePtr("cuMemcpyDtoDAsync src", f, n, c->device); r != kSuccess) return r;
  auto use = std::make_shared<PendingUse>(
      c, std::initializer_list<std::pair<const void*, uint64_t>>{{d, n}, {f, n}});
  Submit(state, [d, f, n, use] {
    std::memmove(d, f, n);
    return kSuccess;
  });
  return kSuccess;
}

STANDIN_EXPORT CUresult cuEventCreate(CUevent* e, unsigned flags) {
  Context* c = nullptr;
  ++S().event_creates;
  if (CUresult r = NeedContext("cuEventCreate", &c); r != kSuccess) return r;
  Standin& st = S();
  if ((flags & kEventBlockingSync) == 0) {
    st.Violation("cuEventCreate without CU_EVENT_BLOCKING_SYNC: a thread waiting on it spins a "
                 "core under the primary context's AUTO scheduling");
  }
  auto state = std::make_unique<EventState>();
  state->device = c->device;
  std::lock_guard<std::mutex> lock(st.mu);
  CUevent h = reinterpret_cast<CUevent>(state.get());
  st.events[h] = std::move(state);
  *e = h;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuEventRecord", &c); r != kSuccess) return r;
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuEventRecord", &err);
  if (state == nullptr) return err;
  Standin& st = S();
  const uint64_t n = ++st.event_records;
  if (st.config.event_error > 0 && n >= static_cast<uint64_t>(st.config.event_error)) {
    return kErrorOutOfMemory;
  }
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.events.find(e);
  if (it == st.events.end()) {
    if (st.reset_handles.count(e) == 0) st.Violation("cuEventRecord of an unknown event");
    return kErrorInvalidHandle;
  }
  if (it->second->device != c->device) {
    st.Violation("cuEventRecord of an event of cuda:" + std::to_string(it->second->device) +
                 " on a stream of cuda:" + std::to_string(c->device));
    return kErrorInvalidHandle;
  }
  it->second->stream = state;
  it->second->seq = state->Submitted();
  return kSuccess;
}

// The stream and submission an event was last recorded at (a null stream:
// never recorded). `fn` names the caller in a violation.
static CUresult RecordedPoint(const char* fn, CUevent e, std::shared_ptr<StreamState>* stream,
                              uint64_t* seq) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.events.find(e);
  if (it == st.events.end()) {
    if (st.reset_handles.count(e) == 0) st.Violation(std::string(fn) + " of an unknown event");
    return kErrorInvalidHandle;
  }
  *stream = it->second->stream;
  *seq = it->second->seq;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuEventSynchronize(CUevent e) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuEventSynchronize", &c); r != kSuccess) return r;
  std::shared_ptr<StreamState> stream;
  uint64_t seq = 0;
  if (CUresult r = RecordedPoint("cuEventSynchronize", e, &stream, &seq); r != kSuccess) return r;
  if (stream == nullptr) return kSuccess;
  const CUresult r = stream->WaitFor(seq);
  return c->sticky != kSuccess ? c->sticky.load() : r;
}

STANDIN_EXPORT CUresult cuEventQuery(CUevent e) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuEventQuery", &c); r != kSuccess) return r;
  std::shared_ptr<StreamState> stream;
  uint64_t seq = 0;
  if (CUresult r = RecordedPoint("cuEventQuery", e, &stream, &seq); r != kSuccess) return r;
  if (stream == nullptr) return kSuccess;
  std::lock_guard<std::mutex> lock(stream->mu);
  return stream->completed >= seq ? kSuccess : kErrorNotReady;
}

STANDIN_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  Standin& st = S();
  if (Current() == nullptr) st.Violation("cuEventDestroy without a current context");
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.events.erase(e) == 0) {
    if (st.reset_handles.count(e) == 0) st.Violation("cuEventDestroy of an unknown event");
    return kErrorInvalidHandle;
  }
  return kSuccess;
}

STANDIN_EXPORT CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuModuleLoadData", &c); r != kSuccess) return r;
  Standin& st = S();
  if (st.config.kernel_load_error != 0) return st.config.kernel_load_error;
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof(magic));
  if (magic != 0xBA55ED50u) {
    st.Violation("cuModuleLoadData of an image that is not a fatbin (magic " +
                 std::to_string(magic) + ")");
    return kErrorInvalidImage;
  }
  auto state = std::make_unique<ModuleState>();
  state->device = c->device;
  std::lock_guard<std::mutex> lock(st.mu);
  CUmodule h = reinterpret_cast<CUmodule>(state.get());
  st.modules[h] = std::move(state);
  *m = h;
  return kSuccess;
}

STANDIN_EXPORT CUresult cuModuleUnload(CUmodule m) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.modules.erase(m) == 0) {
    if (st.reset_handles.count(m) == 0) st.Violation("cuModuleUnload of an unknown module");
    return kErrorInvalidHandle;
  }
  return kSuccess;
}

STANDIN_EXPORT CUresult cuModuleGetFunction(CUfunction* fn, CUmodule m, const char* name) {
  Standin& st = S();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.modules.count(m) == 0) return kErrorInvalidHandle;
  }
  for (const char* const& known : kFunctions) {
    if (std::strcmp(known, name) == 0) {
      *fn = reinterpret_cast<CUfunction>(const_cast<char**>(&known));
      return kSuccess;
    }
  }
  return kErrorNotFound;
}

STANDIN_EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                       CUstream s, void** params, void** extra) {
  Context* c = nullptr;
  if (CUresult r = NeedContext("cuLaunchKernel", &c); r != kSuccess) return r;
  Standin& st = S();
  {
    // A function handle is good while a module of its device is loaded.
    std::lock_guard<std::mutex> lock(st.mu);
    bool loaded = false;
    for (const auto& [h, m] : st.modules) loaded = loaded || m->device == c->device;
    if (!loaded) return kErrorInvalidHandle;
  }
  const char* name = *reinterpret_cast<const char* const*>(fn);
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || gx == 0 || gx > kMaxUnshuffleBlocks ||
      bx != kUnshuffleThreads || shared != 0 || extra != nullptr || params == nullptr) {
    st.Violation(std::string("cuLaunchKernel(") + name + ") with grid " + std::to_string(gx) +
                 "x" + std::to_string(gy) + "x" + std::to_string(gz) + ", block " +
                 std::to_string(bx) + "x" + std::to_string(by) + "x" + std::to_string(bz));
    return kErrorInvalidValue;
  }
  CUresult err = kSuccess;
  auto state = StreamFor(s, c, "cuLaunchKernel", &err);
  if (state == nullptr) return err;
  uint8_t* dst = *static_cast<uint8_t**>(params[0]);
  const uint8_t* src = *static_cast<const uint8_t**>(params[1]);
  const uint64_t n_elem = *static_cast<uint64_t*>(params[2]);
  const uint32_t elem = *static_cast<uint32_t*>(params[3]);
  const uint64_t bytes = n_elem * elem;
  if (CUresult r = CheckDevicePtr("cuLaunchKernel dst", dst, bytes, c->device); r != kSuccess) {
    return r;
  }
  if (CUresult r = CheckDevicePtr("cuLaunchKernel src", src, bytes, c->device); r != kSuccess) {
    return r;
  }
  ++st.launches;
  const std::string kernel = name;
  auto use = std::make_shared<PendingUse>(
      c, std::initializer_list<std::pair<const void*, uint64_t>>{{dst, bytes}, {src, bytes}});
  Submit(state, [kernel, gx, bx, dst, src, n_elem, elem, use] {
    rckpt::cuda::host::RunUnshuffleKernel(kernel, gx, bx, dst, src, n_elem, elem);
    return kSuccess;
  });
  return kSuccess;
}

// ---- Controls ----

STANDIN_EXPORT void rckpt_standin_configure(const RckptStandinConfig* config) {
  S().Reset(*config);
}

STANDIN_EXPORT RckptStandinStats rckpt_standin_stats() {
  Standin& st = S();
  RckptStandinStats out{};
  std::lock_guard<std::mutex> lock(st.mu);
  for (int d = 0; d < kMaxDevices; ++d) {
    out.live_allocations[d] = static_cast<int>(st.allocs[d].size());
    out.live_bytes[d] = st.live_bytes[d];
    out.retained_contexts += st.retained[d];
    out.retains_per_device[d] = st.retains_ever[d];
    out.live_retains[d] = st.retained[d];
  }
  for (const auto& [h, stream] : st.streams) {
    std::lock_guard<std::mutex> slock(stream->mu);
    out.pending_ops += static_cast<int>(stream->submitted - stream->completed);
  }
  for (const auto& stream : st.default_streams) {
    if (stream == nullptr) continue;
    std::lock_guard<std::mutex> slock(stream->mu);
    out.pending_ops += static_cast<int>(stream->submitted - stream->completed);
  }
  out.event_records = st.event_records;
  out.htod_pinned = st.htod_pinned;
  out.htod_pageable = st.htod_pageable;
  out.dtoh_pinned = st.dtoh_pinned;
  out.dtoh_pageable = st.dtoh_pageable;
  out.live_pinned = static_cast<int>(st.pinned.size());
  out.live_streams = static_cast<int>(st.streams.size());
  out.live_events = static_cast<int>(st.events.size());
  out.live_modules = static_cast<int>(st.modules.size());
  out.copies = st.copies;
  out.launches = st.launches;
  out.bad_frees = st.bad_frees;
  out.init_calls = st.init_calls;
  out.mem_host_allocs = st.mem_host_allocs;
  out.mem_allocs = st.mem_allocs;
  out.mem_frees = st.mem_frees;
  out.mem_host_frees = st.mem_host_frees;
  out.stream_creates = st.stream_creates;
  out.event_creates = st.event_creates;
  out.ctx_syncs = st.ctx_syncs;
  out.stream_syncs = st.stream_syncs;
  std::lock_guard<std::mutex> vlock(st.violation_mu);
  out.violations = static_cast<int>(st.violations.size());
  return out;
}

STANDIN_EXPORT int rckpt_standin_violations(char* buf, int len) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.violation_mu);
  std::string all;
  for (const std::string& v : st.violations) all += v + "\n";
  if (buf != nullptr && len > 0) {
    std::snprintf(buf, static_cast<size_t>(len), "%s", all.c_str());
  }
  return static_cast<int>(st.violations.size());
}

STANDIN_EXPORT int rckpt_standin_context_depth() {
  return static_cast<int>(tls_contexts.stack.size());
}

STANDIN_EXPORT int rckpt_standin_current_device() {
  Context* c = Current();
  return c == nullptr ? -1 : c->device;
}

STANDIN_EXPORT void rckpt_standin_set_current_device(int d) {
  auto& stack = tls_contexts.stack;
  if (d < 0) {
    if (!stack.empty()) stack.pop_back();
    return;
  }
  Context* c = &S().primary[d];
  if (stack.empty()) {
    stack.push_back(c);
  } else {
    stack.back() = c;
  }
}

STANDIN_EXPORT void* rckpt_standin_hold_stream(void* stream, int device) {
  Standin& st = S();
  std::shared_ptr<StreamState> state;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (stream == nullptr) {
      auto& d = st.default_streams[device];
      if (d == nullptr) {
        d = std::make_shared<StreamState>(device, st.config.copy_delay_us, /*is_legacy=*/true);
      }
      state = d;
    } else {
      auto it = st.streams.find(static_cast<CUstream>(stream));
      if (it == st.streams.end()) return nullptr;
      state = it->second;
    }
  }
  auto* gate = new std::promise<void>();
  std::shared_future<void> open = gate->get_future().share();
  Submit(state, [open] {
    open.wait();
    return kSuccess;
  });
  return gate;
}

STANDIN_EXPORT void* rckpt_standin_hold_device(int device) {
  Standin& st = S();
  auto* gate = new std::promise<void>();
  std::lock_guard<std::mutex> lock(st.gate_mu);
  st.device_gate[device] = gate->get_future().share();
  return gate;
}

STANDIN_EXPORT void rckpt_standin_fail_waits(int error) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  st.config.event_error = static_cast<int>(st.event_records.load() + 1);
  st.config.stream_sync_error = error;
}

STANDIN_EXPORT void rckpt_standin_lift_faults() {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  st.config.event_error = 0;
  st.config.stream_sync_error = 0;
}

STANDIN_EXPORT void rckpt_standin_release(void* gate) {
  auto* g = static_cast<std::promise<void>*>(gate);
  g->set_value();
  delete g;
  // A released device gate is ready: streams pass it until the next hold.
}

STANDIN_EXPORT void rckpt_standin_reset_device(int d) {
  Standin& st = S();
  WaitForDevice(d);
  std::lock_guard<std::mutex> lock(st.mu);
  // The device's streams, events and modules: their handles marked reset,
  // the objects kept (reset_objects).
  auto retire = [&](auto& handles) {
    for (auto it = handles.begin(); it != handles.end();) {
      if (it->second->device != d) {
        ++it;
        continue;
      }
      using Object = typename std::decay_t<decltype(it->second)>::element_type;
      st.reset_handles.insert(it->first);
      st.reset_objects.push_back(std::shared_ptr<Object>(std::move(it->second)));
      it = handles.erase(it);
    }
  };
  retire(st.streams);
  retire(st.events);
  retire(st.modules);
  for (auto& [start, size] : st.allocs[d]) {
    st.reset_handles.insert(reinterpret_cast<const void*>(start));
    st.reset_memory.push_back(reinterpret_cast<void*>(start));
  }
  st.allocs[d].clear();
  st.live_bytes[d] = 0;
  for (auto it = st.pinned_device.begin(); it != st.pinned_device.end();) {
    if (it->second != d) {
      ++it;
      continue;
    }
    st.reset_handles.insert(it->first);
    st.pinned.erase(it->first);
    st.pinned_sizes.erase(reinterpret_cast<uintptr_t>(it->first));
    st.reset_memory.push_back(it->first);
    it = st.pinned_device.erase(it);
  }
  st.primary[d].sticky = kSuccess;
}

STANDIN_EXPORT int rckpt_standin_device_of(const void* p) {
  Standin& st = S();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.DeviceOfLocked(p, 0);
}

namespace {

// At exit: every violation and every leak fails the process. With
// RCKPT_STANDIN_COUNTS set, the costly calls' counts are written to that
// file first (for measuring a whole program, the demo for one).
struct ExitCheck {
  ~ExitCheck() {
    Standin& st = S();
    if (const char* path = std::getenv("RCKPT_STANDIN_COUNTS"); path != nullptr && *path != '\0') {
      if (FILE* f = std::fopen(path, "w")) {
        std::fprintf(f,
                     "cuMemHostAlloc %llu\ncuMemFreeHost %llu\ncuMemAlloc %llu\ncuMemFree %llu\n"
                     "cuStreamCreate %llu\ncuEventCreate %llu\ncuCtxSynchronize %llu\n"
                     "cuStreamSynchronize %llu\nHtoD from pageable memory %llu\n"
                     "DtoH to pageable memory %llu\n",
                     static_cast<unsigned long long>(st.mem_host_allocs.load()),
                     static_cast<unsigned long long>(st.mem_host_frees.load()),
                     static_cast<unsigned long long>(st.mem_allocs.load()),
                     static_cast<unsigned long long>(st.mem_frees.load()),
                     static_cast<unsigned long long>(st.stream_creates.load()),
                     static_cast<unsigned long long>(st.event_creates.load()),
                     static_cast<unsigned long long>(st.ctx_syncs.load()),
                     static_cast<unsigned long long>(st.stream_syncs.load()),
                     static_cast<unsigned long long>(st.htod_pageable.load()),
                     static_cast<unsigned long long>(st.dtoh_pageable.load()));
        std::fclose(f);
      }
    }
    std::string problems;
    {
      std::lock_guard<std::mutex> lock(st.violation_mu);
      for (const std::string& v : st.violations) problems += "  " + v + "\n";
    }
    {
      std::lock_guard<std::mutex> lock(st.mu);
      for (int d = 0; d < kMaxDevices; ++d) {
        if (!st.allocs[d].empty()) {
          problems += "  leak: " + std::to_string(st.allocs[d].size()) +
                      " device allocation(s) of cuda:" + std::to_string(d) + "\n";
        }
      }
      if (!st.pinned.empty()) {
        problems += "  leak: " + std::to_string(st.pinned.size()) + " pinned allocation(s)\n";
      }
      if (!st.streams.empty()) {
        problems += "  leak: " + std::to_string(st.streams.size()) + " stream(s)\n";
      }
      if (!st.events.empty()) {
        problems += "  leak: " + std::to_string(st.events.size()) + " event(s)\n";
      }
    }
    if (!problems.empty() && std::getenv("RCKPT_STANDIN_NO_EXIT_CHECK") == nullptr) {
      std::fprintf(stderr, "cuda stand-in: this process misused the driver:\n%s", problems.c_str());
      std::fflush(stderr);
      _exit(97);
    }
  }
};
ExitCheck exit_check;

}  // namespace
