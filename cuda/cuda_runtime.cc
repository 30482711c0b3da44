// The CUDA device runtime over the driver API, loaded at run time
// (driver.h). Every call works in the primary context of its device, pushed
// for the call and popped after it, so the caller's current context (and
// torch's current device) is the same afterwards, on every thread. The
// context's flags (its scheduling policy) stay as torch or the application
// set them: waits sleep because rckpt's events block (CU_EVENT_BLOCKING_SYNC),
// whatever the policy.
//
// What it keeps between calls: the un-shuffle module of each device, idle
// events (RecordEvent takes one, DestroyEvent gives it back) and the pool of
// pinned staging, scratch and streams (runtime/device_pool.h). A device
// reset (cudaDeviceReset in the process) makes them stale: the first call
// that meets a stale handle drops them all for that device.
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver.h"
#include "kernel_image.h"
#include "rckpt/runtime.h"
#include "runtime/device_pool.h"
#include "unshuffle_params.h"
#include "util/node.h"

namespace rckpt {
namespace {

using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUfunction;
using cuda::CUmodule;
using cuda::CUstream;
using cuda::Driver;
using cuda::ScopedContext;

CUdeviceptr DevPtr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
CUstream StreamOf(Stream s) { return static_cast<CUstream>(s.handle); }

// An event and the device whose context made it; the runtime's event
// generation and the device's reset count when it was recorded.
struct EventBox {
  CUevent event;
  int device;
  uint64_t generation;
  uint64_t epoch = 0;
};

// The un-shuffle kernels of one device: loaded once, or the reason they
// cannot be.
struct DeviceKernels {
  bool tried = false;
  CUmodule module = nullptr;
  CUfunction tiled = nullptr;
  CUfunction generic = nullptr;
  std::string why_not;
};

// What a call that uses a handle made earlier gets once the device was
// reset (cudaDeviceReset): the handle, or its context, is gone.
bool StaleHandle(cuda::CUresult r) {
  return r == cuda::kErrorInvalidHandle || r == cuda::kErrorContextIsDestroyed;
}

// The errors that end a context for good: the driver runs nothing more in
// it, and every later call fails with the same error until it is destroyed.
bool Sticky(cuda::CUresult r) {
  switch (r) {
    case 214:  // CUDA_ERROR_ECC_UNCORRECTABLE
    case cuda::kErrorIllegalAddress:
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT
    case 710:  // CUDA_ERROR_ASSERT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case cuda::kErrorLaunchFailed:
      return true;
    default:
      return false;
  }
}

bool ImageDoesNotFit(cuda::CUresult r) {
  return r == cuda::kErrorNoBinaryForGpu || r == cuda::kErrorUnsupportedPtxVersion ||
         r == cuda::kErrorInvalidPtx || r == cuda::kErrorInvalidImage ||
         r == cuda::kErrorJitCompilerNotFound;
}

class CudaRuntimeImpl final : public DeviceRuntime {
 public:
  CudaRuntimeImpl(std::string library, uint64_t pinned_cap)
      : driver_(std::move(library)), pool_(*this, pinned_cap) {
    pool_.set_validator([this](DevicePool::Kind kind, Device device, void* handle) {
      return StillThere(kind, device, handle);
    });
  }

  ~CudaRuntimeImpl() override {
    ReleasePool();
    if (getpid() != pid_) return;  // a forked child: every handle is the parent's
    std::lock_guard<std::mutex> lock(kernels_mu_);
    for (auto& [device, k] : kernels_) {
      if (k.module == nullptr) continue;
      ScopedContext ctx(driver_, device, "unloading the un-shuffle kernels");
      if (ctx.status().ok()) (void)driver_.api().ModuleUnload(k.module);
    }
  }

  std::string_view name() const override { return "cuda"; }

  DevicePool* pool() override { return &pool_; }

  // `f` runs once, when this runtime first makes something of the driver's
  // (so after the driver library was loaded).
  void OnFirstUse(std::function<void()> f) { on_first_use_ = std::move(f); }

  DevicePoolStats PoolStats() override {
    DevicePoolStats s = pool_.Stats();
    std::lock_guard<std::mutex> lock(events_mu_);
    ForgetIfForkedLocked();
    s.events = events_held_;
    s.events_created = events_created_;
    return s;
  }

  void ReleasePool() override {
    pool_.Release();
    std::map<int, std::vector<CUevent>> idle;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      ForgetIfForkedLocked();
      idle.swap(idle_events_);
      for (const auto& [device, events] : idle) events_held_ -= static_cast<int>(events.size());
      ++event_generation_;
    }
    for (const auto& [device, events] : idle) {
      ScopedContext ctx(driver_, device, "releasing events");
      if (!ctx.status().ok()) continue;  // a driver shut down at exit: nothing to free
      for (CUevent e : events) (void)driver_.api().EventDestroy(e);
    }
  }

  Result<int> DeviceCount() override {
    const cuda::DriverState& s = driver_.State();
    if (!s.status.ok()) return s.status;
    return s.device_count;
  }

  std::string NoDeviceReason() override {
    const cuda::DriverState& s = driver_.State();
    return s.status.ok() && s.device_count == 0 ? s.no_device_reason : "";
  }

  Result<int> CurrentDevice() override {
    RCKPT_ASSIGN_OR_RETURN(int ordinal, driver_.CurrentOrdinal());
    if (ordinal >= 0) return ordinal;
    // A thread without a context (a loader thread; before CUDA 12, any
    // thread after cudaSetDevice until its first call): the launcher's
    // local rank, not every rank's cuda:0.
    RCKPT_ASSIGN_OR_RETURN(int count, DeviceCount());
    return DefaultDeviceIndex(ReadNodeFacts(), count);
  }

  Result<void*> Allocate(Device device, uint64_t bytes) override {
    ScopedContext ctx(driver_, Index(device), "Allocate");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    CUdeviceptr p = 0;
    // A zero-byte allocation would give no pointer; a distinct one keeps
    // callers simple.
    RCKPT_RETURN_IF_ERROR(driver_.Check(driver_.api().MemAlloc(&p, bytes == 0 ? 1 : bytes),
                                        "cuMemAlloc of " + std::to_string(bytes) + " bytes on " +
                                            device.ToString()));
    Used();
    return reinterpret_cast<void*>(p);
  }

  void Free(Device device, void* ptr) override {
    if (ptr == nullptr) return;
    ScopedContext ctx(driver_, Index(device), "Free");
    if (ctx.status().ok()) (void)driver_.api().MemFree(DevPtr(ptr));
  }

  Result<void*> AllocatePinned(Device device, uint64_t bytes) override {
    ScopedContext ctx(driver_, Index(device), "AllocatePinned");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    void* p = nullptr;
    RCKPT_RETURN_IF_ERROR(driver_.Check(
        driver_.api().MemHostAlloc(&p, bytes == 0 ? 1 : bytes, cuda::kMemHostAllocPortable),
        "cuMemHostAlloc of " + std::to_string(bytes) + " bytes of pinned host memory"));
    Used();
    std::lock_guard<std::mutex> lock(pinned_mu_);
    pinned_[p] = Index(device);
    return p;
  }

  void FreePinned(void* ptr) override {
    if (ptr == nullptr) return;
    int device = 0;
    {
      std::lock_guard<std::mutex> lock(pinned_mu_);
      auto it = pinned_.find(ptr);
      if (it == pinned_.end()) return;
      device = it->second;
      pinned_.erase(it);
    }
    ScopedContext ctx(driver_, device, "FreePinned");
    if (ctx.status().ok()) (void)driver_.api().MemFreeHost(ptr);
  }

  Result<Stream> CreateStream(Device device) override {
    ScopedContext ctx(driver_, Index(device), "CreateStream");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    CUstream s = nullptr;
    RCKPT_RETURN_IF_ERROR(driver_.Check(driver_.api().StreamCreate(&s, cuda::kStreamNonBlocking),
                                        "cuStreamCreate on " + device.ToString()));
    Used();
    return Stream{s};
  }

  void DestroyStream(Device device, Stream stream) override {
    if (stream.handle == nullptr) return;
    ScopedContext ctx(driver_, Index(device), "DestroyStream");
    if (ctx.status().ok()) (void)driver_.api().StreamDestroy(StreamOf(stream));
  }

  Status CopyToDeviceAsync(Device device, Stream stream, void* dst, const void* src,
                           uint64_t bytes) override {
    ScopedContext ctx(driver_, Index(device), "CopyToDeviceAsync");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return Stale(device, driver_.api().MemcpyHtoDAsync(DevPtr(dst), src, bytes, StreamOf(stream)),
                 "cuMemcpyHtoDAsync of " + std::to_string(bytes) + " bytes to " +
                     device.ToString());
  }

  Status CopyToHostAsync(Device device, Stream stream, void* dst, const void* src,
                         uint64_t bytes) override {
    ScopedContext ctx(driver_, Index(device), "CopyToHostAsync");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return Stale(device, driver_.api().MemcpyDtoHAsync(dst, DevPtr(src), bytes, StreamOf(stream)),
                 "cuMemcpyDtoHAsync of " + std::to_string(bytes) + " bytes from " +
                     device.ToString());
  }

  bool CanUnshuffle(Device device, std::string* why_not) override {
    const DeviceKernels& k = KernelsOf(device, /*check=*/true);
    if (k.module == nullptr && why_not != nullptr) *why_not = k.why_not;
    return k.module != nullptr;
  }

  Status UnshuffleAsync(Device device, Stream stream, void* dst, const void* src, uint64_t bytes,
                        uint32_t elem_size) override {
    if (elem_size < 2) {
      return Status::InvalidArgument("UnshuffleAsync: elem_size " + std::to_string(elem_size) +
                                     ", expected >= 2");
    }
    const DeviceKernels& k = KernelsOf(device);
    if (k.module == nullptr) {
      return Status::Unsupported("UnshuffleAsync on " + device.ToString() + ": " + k.why_not);
    }
    ScopedContext ctx(driver_, Index(device), "UnshuffleAsync");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    const cuda::UnshuffleLaunch l = cuda::PlanUnshuffle(bytes, elem_size);
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    if (l.kernel != nullptr) {
      uint64_t n_elem = l.n_elem;
      uint32_t elem = elem_size;
      void* params[] = {&d, &s, &n_elem, &elem};
      CUfunction fn = l.kernel == std::string_view(cuda::kUnshuffleTiledKernel) ? k.tiled : k.generic;
      RCKPT_RETURN_IF_ERROR(
          Stale(device,
                driver_.api().LaunchKernel(fn, l.blocks, 1, 1, cuda::kUnshuffleThreads, 1, 1, 0,
                                           StreamOf(stream), params, nullptr),
                std::string("cuLaunchKernel(") + l.kernel + ") on " + device.ToString()));
    }
    if (bytes > l.body_bytes) {
      // The trailing partial element is stored unshuffled at the end.
      RCKPT_RETURN_IF_ERROR(driver_.Check(
          driver_.api().MemcpyDtoDAsync(DevPtr(d + l.body_bytes), DevPtr(s + l.body_bytes),
                                        bytes - l.body_bytes, StreamOf(stream)),
          "cuMemcpyDtoDAsync of an un-shuffle's tail on " + device.ToString()));
    }
    return Status::Ok();
  }

  Result<Event> RecordEvent(Device device, Stream stream) override {
    ScopedContext ctx(driver_, Index(device), "RecordEvent");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    auto box = std::make_unique<EventBox>(EventBox{nullptr, device.index, 0});
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      ForgetIfForkedLocked();
      box->generation = event_generation_;
      box->epoch = epochs_[device.index];
      std::vector<CUevent>& idle = idle_events_[device.index];
      if (!idle.empty()) {
        box->event = idle.back();
        idle.pop_back();
      }
    }
    if (box->event != nullptr && StaleHandle(driver_.api().EventQuery(box->event))) {
      // Gone with a device reset, and so is the rest of what was kept.
      ForgetDevice(device.index);
      std::lock_guard<std::mutex> lock(events_mu_);
      --events_held_;  // ForgetDevice counted the idle ones only
      box->event = nullptr;
      box->epoch = epochs_[device.index];
    }
    if (box->event == nullptr) {
      // Blocking: a thread waiting on it sleeps whatever the context's
      // scheduling policy (AUTO spins when cores outnumber active contexts).
      RCKPT_RETURN_IF_ERROR(driver_.Check(
          driver_.api().EventCreate(&box->event,
                                    cuda::kEventDisableTiming | cuda::kEventBlockingSync),
          "cuEventCreate on " + device.ToString()));
      Used();
      std::lock_guard<std::mutex> lock(events_mu_);
      ++events_created_;
      ++events_held_;
    }
    const cuda::CUresult r = driver_.api().EventRecord(box->event, StreamOf(stream));
    if (r != cuda::kSuccess) {
      DestroyEvent(Event{box.release()});
      return Stale(device, r, "cuEventRecord on " + device.ToString());
    }
    return Event{box.release()};
  }

  Status StreamWaitEvent(Device device, Stream stream, Event event) override {
    if (event.handle == nullptr) return Status::Ok();
    ScopedContext ctx(driver_, Index(device), "StreamWaitEvent");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return Stale(device, driver_.api().StreamWaitEvent(StreamOf(stream), Box(event)->event, 0),
                 "cuStreamWaitEvent on " + device.ToString());
  }

  Status WaitEvent(Event event) override {
    if (event.handle == nullptr) return Status::Ok();
    const EventBox* box = Box(event);
    ScopedContext ctx(driver_, box->device, "WaitEvent");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return Stale(Device::Cuda(box->device), driver_.api().EventSynchronize(box->event),
                 "cuEventSynchronize on cuda:" + std::to_string(box->device));
  }

  // Gives the event back for the next RecordEvent: a wait already enqueued
  // on it (StreamWaitEvent) keeps the point it was recorded at, as the
  // driver promises for an event recorded again.
  void DestroyEvent(Event event) override {
    if (event.handle == nullptr) return;
    std::unique_ptr<EventBox> box(Box(event));
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      if (ForgetIfForkedLocked()) return;  // the parent's, in a forked child
      const bool reset = box->epoch != epochs_[box->device];
      if (box->generation == event_generation_ && !reset) {
        idle_events_[box->device].push_back(box->event);
        return;
      }
      --events_held_;
      if (reset) return;  // gone with its device's reset
    }
    ScopedContext ctx(driver_, box->device, "DestroyEvent");
    if (ctx.status().ok()) (void)driver_.api().EventDestroy(box->event);
  }

  // Through a blocking event: the waiting thread sleeps (cuStreamSynchronize
  // would spin under the AUTO scheduling policy). When no event can be
  // recorded (no event left, a failed record), the stream itself is waited
  // for: returning unwaited would let the caller reuse memory a copy still
  // uses.
  Status Synchronize(Device device, Stream stream) override {
    Result<Event> e = RecordEvent(device, stream);
    if (e.ok()) {
      Status s = WaitEvent(*e);
      DestroyEvent(*e);
      return s;
    }
    ScopedContext ctx(driver_, Index(device), "Synchronize");
    Status waited = ctx.status();
    if (waited.ok()) {
      waited = Stale(device, driver_.api().StreamSynchronize(StreamOf(stream)),
                     "cuStreamSynchronize on " + device.ToString());
      if (waited.ok()) return waited;
    }
    return Status(waited.code(), e.status().message() + "; then " + waited.message());
  }

  // cuCtxSynchronize waits for every stream of the device; a context ended
  // by a sticky error runs nothing more, so its memory is no copy's either.
  bool DeviceSettled(Device device) override {
    if (!device.is_cuda()) return true;
    ScopedContext ctx(driver_, Index(device), "DeviceSettled");
    if (!ctx.status().ok()) return false;
    const cuda::CUresult r = driver_.api().CtxSynchronize();
    return r == cuda::kSuccess || Sticky(r);
  }

 private:
  static EventBox* Box(Event e) { return static_cast<EventBox*>(e.handle); }

  void Used() {
    if (on_first_use_) std::call_once(first_use_, on_first_use_);
  }

  // The status of `r`; for a stale handle (the device was reset since it was
  // made), what this runtime keeps of the device is dropped first, so the
  // next call starts afresh.
  Status Stale(Device device, cuda::CUresult r, const std::string& what) {
    if (r == cuda::kSuccess) return Status::Ok();
    Status s = driver_.Check(r, what);
    if (!StaleHandle(r) || !device.is_cuda()) return s;
    ForgetDevice(device.index);
    return Status::DeviceError(s.message() + " (" + device.ToString() +
                               " was reset, e.g. by cudaDeviceReset: the streams, events, "
                               "buffers and kernels rckpt kept for it were dropped, and the "
                               "next call makes them anew)");
  }

  // Whether a resource the pool kept of `device` survived until now (a
  // device reset frees them all). Cheap queries that never wait.
  bool StillThere(DevicePool::Kind kind, Device device, void* handle) {
    ScopedContext ctx(driver_, Index(device), "checking a pooled resource");
    if (!ctx.status().ok()) return true;  // the call that uses it says why
    cuda::CUresult r = cuda::kSuccess;
    switch (kind) {
      case DevicePool::Kind::kPinned: {
        unsigned flags = 0;
        r = driver_.api().MemHostGetFlags(&flags, handle);
        break;
      }
      case DevicePool::Kind::kScratch: {
        CUdeviceptr base = 0;
        size_t bytes = 0;
        r = driver_.api().MemGetAddressRange(&base, &bytes, DevPtr(handle));
        break;
      }
      case DevicePool::Kind::kStream:
        r = driver_.api().StreamQuery(static_cast<CUstream>(handle));
        if (r == cuda::kErrorNotReady) r = cuda::kSuccess;
        break;
    }
    if (r == cuda::kSuccess) return true;
    ForgetDevice(device.index, /*pool=*/false);  // the pool forgets its own share
    return false;
  }

  void ForgetDevice(int device, bool pool = true) {
    if (pool) pool_.ForgetDevice(Device::Cuda(device));
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      ++epochs_[device];
      events_held_ -= static_cast<int>(idle_events_[device].size());
      idle_events_[device].clear();
    }
    std::lock_guard<std::mutex> lock(kernels_mu_);
    kernels_.erase(device);  // its module went with the reset
  }

  // In a child forked after this runtime was used, every handle it holds is
  // the parent's: forgotten, never used or freed. True when the process is
  // such a child. REQUIRES: events_mu_ held.
  bool ForgetIfForkedLocked() {
    const pid_t now = getpid();
    if (now == pid_) return false;
    idle_events_.clear();
    events_held_ = 0;
    ++event_generation_;
    pid_ = now;
    return true;
  }

  // The ordinal of a CUDA device; -1 (which every call rejects as a device
  // that does not exist) for the CPU.
  static int Index(Device device) { return device.is_cuda() ? device.index : -1; }

  // `check`: a module loaded earlier is asked whether it survived (a device
  // reset unloads it), and loaded again when it did not.
  const DeviceKernels& KernelsOf(Device device, bool check = false) {
    std::unique_lock<std::mutex> lock(kernels_mu_);
    if (const pid_t now = getpid(); now != kernels_pid_) {
      kernels_.clear();  // the parent's modules, in a forked child
      kernels_pid_ = now;
    }
    if (check && kernels_[Index(device)].module != nullptr) {
      CUfunction fn = nullptr;
      ScopedContext ctx(driver_, Index(device), "checking the un-shuffle kernels");
      if (ctx.status().ok() &&
          StaleHandle(driver_.api().ModuleGetFunction(&fn, kernels_[Index(device)].module,
                                                      cuda::kUnshuffleTiledKernel))) {
        lock.unlock();
        ForgetDevice(Index(device));
        lock.lock();
      }
    }
    DeviceKernels& k = kernels_[Index(device)];
    if (k.tried) return k;
    k.tried = true;
    const cuda::DriverState& s = driver_.State();
    if (s.status.ok() && s.version < kMinKernelDriverVersion) {
      k.why_not = "the driver supports " + cuda::VersionText(s.version) +
                  "; the shipped kernel image needs " +
                  cuda::VersionText(kMinKernelDriverVersion) + " (driver " +
                  kMinKernelDriverBranch + "+)";
      return k;
    }
    ScopedContext ctx(driver_, Index(device), "loading the un-shuffle kernels");
    if (!ctx.status().ok()) {
      k.why_not = ctx.status().message();
      return k;
    }
    const cuda::CUresult r = driver_.api().ModuleLoadData(&k.module, cuda::UnshuffleKernelImage().data());
    if (r != cuda::kSuccess) {
      k.module = nullptr;
      k.why_not = "the kernel image (" + cuda::UnshuffleKernelSummary() + ") does not load on " +
                  device.ToString() + ": " + driver_.ErrorName(r) +
                  (ImageDoesNotFit(r) ? "" : " (" + driver_.Check(r, "cuModuleLoadData").message() + ")");
      return k;
    }
    Status fs = driver_.Check(
        driver_.api().ModuleGetFunction(&k.tiled, k.module, cuda::kUnshuffleTiledKernel),
        "cuModuleGetFunction");
    if (fs.ok()) {
      fs = driver_.Check(
          driver_.api().ModuleGetFunction(&k.generic, k.module, cuda::kUnshuffleGenericKernel),
          "cuModuleGetFunction");
    }
    if (!fs.ok()) {
      (void)driver_.api().ModuleUnload(k.module);
      k.module = nullptr;
      k.why_not = "the kernel image lacks its kernels: " + fs.message();
    }
    return k;
  }

  Driver driver_;
  std::mutex pinned_mu_;
  std::map<void*, int> pinned_;
  std::mutex kernels_mu_;
  std::map<int, DeviceKernels> kernels_;
  pid_t kernels_pid_ = getpid();
  std::mutex events_mu_;
  std::map<int, std::vector<CUevent>> idle_events_;  // by device
  std::map<int, uint64_t> epochs_;                   // resets seen, by device
  uint64_t event_generation_ = 0;                    // ReleasePool count
  int events_held_ = 0;
  uint64_t events_created_ = 0;
  pid_t pid_ = getpid();
  std::function<void()> on_first_use_;
  std::once_flag first_use_;
  DevicePool pool_;  // last: released first, while the rest still works
};

}  // namespace

Result<std::unique_ptr<DeviceRuntime>> NewCudaRuntime(const CudaRuntimeOptions& options) {
  if (options.driver_library.empty()) {
    return Status::InvalidArgument("CudaRuntimeOptions.driver_library is empty");
  }
  return std::unique_ptr<DeviceRuntime>(
      new CudaRuntimeImpl(options.driver_library, options.pinned_pool_bytes));
}

namespace {

DeviceRuntime* g_process_runtime = nullptr;

// At exit the pool's pinned memory and streams go back to the driver (a
// driver already shut down answers CUDA_ERROR_DEINITIALIZED, which the
// frees ignore). Registered when the pool first holds something, so it runs
// before the exit handlers of the driver library, loaded before that.
void ReleaseAtExit() { g_process_runtime->ReleasePool(); }

uint64_t PinnedPoolCapFromEnvironment() {
  const char* v = std::getenv("RCKPT_PINNED_POOL_BYTES");
  if (v == nullptr || *v == '\0') return kDefaultPinnedPoolBytes;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return end != nullptr && *end == '\0' ? n : kDefaultPinnedPoolBytes;
}

}  // namespace

Result<DeviceRuntime*> CudaRuntime() {
  static DeviceRuntime* runtime = [] {
    auto* rt = new CudaRuntimeImpl("libcuda.so.1", PinnedPoolCapFromEnvironment());  // never destroyed
    g_process_runtime = rt;
    rt->OnFirstUse([] { std::atexit(ReleaseAtExit); });
    return rt;
  }();
  return runtime;
}

}  // namespace rckpt
