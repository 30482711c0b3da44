// The CUDA device runtime over the driver API, loaded at run time
// (driver.h). Every call works in the primary context of its device, pushed
// for the call and popped after it, so the caller's current context (and
// torch's current device) is the same afterwards, on every thread.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver.h"
#include "kernel_image.h"
#include "rckpt/runtime.h"
#include "unshuffle_params.h"

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

// An event and the device whose context made it.
struct EventBox {
  CUevent event;
  int device;
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

bool ImageDoesNotFit(cuda::CUresult r) {
  return r == cuda::kErrorNoBinaryForGpu || r == cuda::kErrorUnsupportedPtxVersion ||
         r == cuda::kErrorInvalidPtx || r == cuda::kErrorInvalidImage ||
         r == cuda::kErrorJitCompilerNotFound;
}

class CudaRuntimeImpl final : public DeviceRuntime {
 public:
  explicit CudaRuntimeImpl(std::string library) : driver_(std::move(library)) {}

  ~CudaRuntimeImpl() override {
    std::lock_guard<std::mutex> lock(kernels_mu_);
    for (auto& [device, k] : kernels_) {
      if (k.module == nullptr) continue;
      ScopedContext ctx(driver_, device, "unloading the un-shuffle kernels");
      if (ctx.status().ok()) (void)driver_.api().ModuleUnload(k.module);
    }
  }

  std::string_view name() const override { return "cuda"; }

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
    return ordinal < 0 ? 0 : ordinal;
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
    return driver_.Check(driver_.api().MemcpyHtoDAsync(DevPtr(dst), src, bytes, StreamOf(stream)),
                         "cuMemcpyHtoDAsync of " + std::to_string(bytes) + " bytes to " +
                             device.ToString());
  }

  Status CopyToHostAsync(Device device, Stream stream, void* dst, const void* src,
                         uint64_t bytes) override {
    ScopedContext ctx(driver_, Index(device), "CopyToHostAsync");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return driver_.Check(driver_.api().MemcpyDtoHAsync(dst, DevPtr(src), bytes, StreamOf(stream)),
                         "cuMemcpyDtoHAsync of " + std::to_string(bytes) + " bytes from " +
                             device.ToString());
  }

  bool CanUnshuffle(Device device, std::string* why_not) override {
    const DeviceKernels& k = KernelsOf(device);
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
      RCKPT_RETURN_IF_ERROR(driver_.Check(
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
    CUevent e = nullptr;
    RCKPT_RETURN_IF_ERROR(driver_.Check(driver_.api().EventCreate(&e, cuda::kEventDisableTiming),
                                        "cuEventCreate on " + device.ToString()));
    Status s = driver_.Check(driver_.api().EventRecord(e, StreamOf(stream)),
                             "cuEventRecord on " + device.ToString());
    if (!s.ok()) {
      (void)driver_.api().EventDestroy(e);
      return s;
    }
    return Event{new EventBox{e, device.index}};
  }

  Status StreamWaitEvent(Device device, Stream stream, Event event) override {
    if (event.handle == nullptr) return Status::Ok();
    ScopedContext ctx(driver_, Index(device), "StreamWaitEvent");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return driver_.Check(
        driver_.api().StreamWaitEvent(StreamOf(stream), Box(event)->event, 0),
        "cuStreamWaitEvent on " + device.ToString());
  }

  Status WaitEvent(Event event) override {
    if (event.handle == nullptr) return Status::Ok();
    const EventBox* box = Box(event);
    ScopedContext ctx(driver_, box->device, "WaitEvent");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return driver_.Check(driver_.api().EventSynchronize(box->event),
                         "cuEventSynchronize on cuda:" + std::to_string(box->device));
  }

  void DestroyEvent(Event event) override {
    if (event.handle == nullptr) return;
    std::unique_ptr<EventBox> box(Box(event));
    ScopedContext ctx(driver_, box->device, "DestroyEvent");
    if (ctx.status().ok()) (void)driver_.api().EventDestroy(box->event);
  }

  Status Synchronize(Device device, Stream stream) override {
    ScopedContext ctx(driver_, Index(device), "Synchronize");
    RCKPT_RETURN_IF_ERROR(ctx.status());
    return driver_.Check(driver_.api().StreamSynchronize(StreamOf(stream)),
                         "cuStreamSynchronize on " + device.ToString());
  }

 private:
  static EventBox* Box(Event e) { return static_cast<EventBox*>(e.handle); }

  // The ordinal of a CUDA device; -1 (which every call rejects as a device
  // that does not exist) for the CPU.
  static int Index(Device device) { return device.is_cuda() ? device.index : -1; }

  const DeviceKernels& KernelsOf(Device device) {
    std::lock_guard<std::mutex> lock(kernels_mu_);
    DeviceKernels& k = kernels_[Index(device)];
    if (k.tried) return k;
    k.tried = true;
    const cuda::DriverState& s = driver_.State();
    if (s.status.ok() && s.version < kMinKernelDriverVersion) {
      k.why_not = "the driver supports " + cuda::VersionText(s.version) +
                  "; the shipped kernel image needs " +
                  cuda::VersionText(kMinKernelDriverVersion) + " (driver R580+)";
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
};

}  // namespace

Result<std::unique_ptr<DeviceRuntime>> NewCudaRuntime(const CudaRuntimeOptions& options) {
  if (options.driver_library.empty()) {
    return Status::InvalidArgument("CudaRuntimeOptions.driver_library is empty");
  }
  return std::unique_ptr<DeviceRuntime>(new CudaRuntimeImpl(options.driver_library));
}

Result<DeviceRuntime*> CudaRuntime() {
  static DeviceRuntime* runtime = new CudaRuntimeImpl("libcuda.so.1");  // never destroyed
  return runtime;
}

}  // namespace rckpt
