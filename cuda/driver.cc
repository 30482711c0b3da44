#include "driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "rckpt/runtime.h"

namespace rckpt::cuda {

std::string VersionText(int v) {
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

namespace {

// Names for the errors rckpt explains, for when the driver cannot say.
const char* KnownErrorName(CUresult r) {
  switch (r) {
    case kSuccess: return "CUDA_SUCCESS";
    case kErrorInvalidValue: return "CUDA_ERROR_INVALID_VALUE";
    case kErrorOutOfMemory: return "CUDA_ERROR_OUT_OF_MEMORY";
    case kErrorNotInitialized: return "CUDA_ERROR_NOT_INITIALIZED";
    case kErrorDeinitialized: return "CUDA_ERROR_DEINITIALIZED";
    case kErrorStubLibrary: return "CUDA_ERROR_STUB_LIBRARY";
    case kErrorInsufficientDriver: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case kErrorDeviceUnavailable: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case kErrorNoDevice: return "CUDA_ERROR_NO_DEVICE";
    case kErrorInvalidDevice: return "CUDA_ERROR_INVALID_DEVICE";
    case kErrorInvalidImage: return "CUDA_ERROR_INVALID_IMAGE";
    case kErrorInvalidContext: return "CUDA_ERROR_INVALID_CONTEXT";
    case kErrorNoBinaryForGpu: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case kErrorInvalidPtx: return "CUDA_ERROR_INVALID_PTX";
    case kErrorJitCompilerNotFound: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
    case kErrorUnsupportedPtxVersion: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case kErrorOperatingSystem: return "CUDA_ERROR_OPERATING_SYSTEM";
    case kErrorInvalidHandle: return "CUDA_ERROR_INVALID_HANDLE";
    case kErrorNotFound: return "CUDA_ERROR_NOT_FOUND";
    case kErrorNotReady: return "CUDA_ERROR_NOT_READY";
    case kErrorIllegalAddress: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case kErrorContextIsDestroyed: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case kErrorLaunchFailed: return "CUDA_ERROR_LAUNCH_FAILED";
    case kErrorNotPermitted: return "CUDA_ERROR_NOT_PERMITTED";
    case kErrorNotSupported: return "CUDA_ERROR_NOT_SUPPORTED";
    case kErrorSystemNotReady: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case kErrorSystemDriverMismatch: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case kErrorCompatNotSupportedOnDevice: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case kErrorUnknown: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

// What CUDA_VISIBLE_DEVICES is, for messages; nullopt-like "" when unset.
bool VisibleDevices(std::string* value) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) return false;
  *value = v;
  return true;
}

}  // namespace

Driver::Driver(std::string library, std::string dev_dir)
    : library_(std::move(library)), dev_dir_(std::move(dev_dir)) {}

Driver::~Driver() {
  std::lock_guard<std::mutex> lock(ctx_mu_);
  for (size_t i = 0; i < contexts_.size(); ++i) {
    if (contexts_[i] != nullptr) api_.DevicePrimaryCtxRelease(devices_[i]);
  }
}

const DriverState& Driver::State() {
  std::call_once(open_once_, [this] { state_ = Open(); });
  return state_;
}

std::string Driver::DeviceFilesNote() const {
  DIR* d = opendir(dev_dir_.c_str());
  if (d == nullptr) return "";
  std::string found;
  bool denied = false;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const bool gpu_file = name == "nvidiactl" ||
                          (name.rfind("nvidia", 0) == 0 && name.size() > 6 &&
                           std::isdigit(static_cast<unsigned char>(name[6])));
    if (!gpu_file) continue;
    const std::string path = dev_dir_ + "/" + name;
    if (found.empty() || name != "nvidiactl") found = path;
    if (access(path.c_str(), R_OK | W_OK) != 0) denied = true;
  }
  closedir(d);
  if (found.empty()) return "";
  return found + (denied ? " exists but this process may not open it" : " exists");
}

Status Driver::Resolve(void* handle, const DriverState& s) {
  struct Entry {
    const char* symbol;
    void** slot;
  };
  const Entry entries[] = {
      {"cuInit", reinterpret_cast<void**>(&api_.Init)},
      {"cuGetErrorName", reinterpret_cast<void**>(&api_.GetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void**>(&api_.GetErrorString)},
      {"cuDeviceGetCount", reinterpret_cast<void**>(&api_.DeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void**>(&api_.DeviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void**>(&api_.DeviceGetName)},
      {"cuDeviceGetUuid_v2", reinterpret_cast<void**>(&api_.DeviceGetUuid)},
      {"cuDeviceTotalMem_v2", reinterpret_cast<void**>(&api_.DeviceTotalMem)},
      {"cuDeviceGetPCIBusId", reinterpret_cast<void**>(&api_.DeviceGetPCIBusId)},
      {"cuDeviceGetAttribute", reinterpret_cast<void**>(&api_.DeviceGetAttribute)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&api_.DevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease_v2", reinterpret_cast<void**>(&api_.DevicePrimaryCtxRelease)},
      {"cuCtxPushCurrent_v2", reinterpret_cast<void**>(&api_.CtxPushCurrent)},
      {"cuCtxPopCurrent_v2", reinterpret_cast<void**>(&api_.CtxPopCurrent)},
      {"cuCtxGetCurrent", reinterpret_cast<void**>(&api_.CtxGetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void**>(&api_.CtxGetDevice)},
      {"cuMemAlloc_v2", reinterpret_cast<void**>(&api_.MemAlloc)},
      {"cuMemFree_v2", reinterpret_cast<void**>(&api_.MemFree)},
      {"cuMemHostAlloc", reinterpret_cast<void**>(&api_.MemHostAlloc)},
      {"cuMemFreeHost", reinterpret_cast<void**>(&api_.MemFreeHost)},
      {"cuMemHostGetFlags", reinterpret_cast<void**>(&api_.MemHostGetFlags)},
      {"cuMemGetAddressRange_v2", reinterpret_cast<void**>(&api_.MemGetAddressRange)},
      {"cuStreamQuery", reinterpret_cast<void**>(&api_.StreamQuery)},
      {"cuStreamSynchronize", reinterpret_cast<void**>(&api_.StreamSynchronize)},
      {"cuCtxSynchronize", reinterpret_cast<void**>(&api_.CtxSynchronize)},
      {"cuEventQuery", reinterpret_cast<void**>(&api_.EventQuery)},
      {"cuStreamCreate", reinterpret_cast<void**>(&api_.StreamCreate)},
      {"cuStreamDestroy_v2", reinterpret_cast<void**>(&api_.StreamDestroy)},
      {"cuStreamWaitEvent", reinterpret_cast<void**>(&api_.StreamWaitEvent)},
      {"cuMemcpyHtoDAsync_v2", reinterpret_cast<void**>(&api_.MemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync_v2", reinterpret_cast<void**>(&api_.MemcpyDtoHAsync)},
      {"cuMemcpyDtoDAsync_v2", reinterpret_cast<void**>(&api_.MemcpyDtoDAsync)},
      {"cuEventCreate", reinterpret_cast<void**>(&api_.EventCreate)},
      {"cuEventRecord", reinterpret_cast<void**>(&api_.EventRecord)},
      {"cuEventSynchronize", reinterpret_cast<void**>(&api_.EventSynchronize)},
      {"cuEventDestroy_v2", reinterpret_cast<void**>(&api_.EventDestroy)},
      {"cuModuleLoadData", reinterpret_cast<void**>(&api_.ModuleLoadData)},
      {"cuModuleUnload", reinterpret_cast<void**>(&api_.ModuleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void**>(&api_.ModuleGetFunction)},
      {"cuLaunchKernel", reinterpret_cast<void**>(&api_.LaunchKernel)},
  };
  for (const Entry& e : entries) {
    *e.slot = dlsym(handle, e.symbol);
    if (*e.slot == nullptr) {
      return Status::DeviceUnavailable(
          "the CUDA driver library " + s.path + " (" + VersionText(s.version) +
          ") has no " + e.symbol + ": rckpt needs a driver for " +
          VersionText(kMinCudaDriverVersion) + " or newer (R470+); update the NVIDIA driver");
    }
  }
  return Status::Ok();
}

DriverState Driver::Open() {
  DriverState s;
  opened_pid_ = getpid();
  dlerror();
  void* handle = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    const std::string why = err != nullptr ? err : "unknown dlopen error";
    const std::string files = DeviceFilesNote();
    if (files.empty()) {
      s.no_device_reason = library_ + " was not found (" + why +
                           "): no NVIDIA driver is installed here, or this container was "
                           "started without the NVIDIA container runtime";
      return s;
    }
    s.status = Status::DeviceUnavailable(
        "a GPU is present (" + files + ") but the CUDA driver library " + library_ +
        " cannot be loaded: " + why +
        "; install the NVIDIA driver's user-space libraries, or make the directory that "
        "holds libcuda.so.1 known to the loader (ldconfig or LD_LIBRARY_PATH)");
    return s;
  }
  // The state reports the file that was loaded, not the name searched for.
  link_map* map = nullptr;
  s.path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name[0] != '\0'
               ? map->l_name
               : library_;
  api_.DriverGetVersion =
      reinterpret_cast<decltype(api_.DriverGetVersion)>(dlsym(handle, "cuDriverGetVersion"));
  if (api_.DriverGetVersion == nullptr) {
    s.status = Status::DeviceUnavailable("the library " + s.path +
                                         " is not a CUDA driver (it has no cuDriverGetVersion)");
    return s;
  }
  if (api_.DriverGetVersion(&s.version) != kSuccess) s.version = 0;
  if (s.version < kMinCudaDriverVersion) {
    s.status = Status::DeviceUnavailable(
        "the NVIDIA driver (" + s.path + ") supports " + VersionText(s.version) +
        " (cuDriverGetVersion " + std::to_string(s.version) + "); rckpt needs " +
        VersionText(kMinCudaDriverVersion) + " or newer: update the driver to R470 or newer");
    return s;
  }
  s.status = Resolve(handle, s);
  if (!s.status.ok()) return s;

  const CUresult init = api_.Init(0);
  std::string visible;
  const bool visible_set = VisibleDevices(&visible);
  const std::string no_device =
      visible_set ? "CUDA_VISIBLE_DEVICES='" + visible + "' hides every device"
                  : "the NVIDIA driver (" + VersionText(s.version) + ") reports no CUDA device";
  if (init == kErrorNoDevice) {
    s.no_device_reason = no_device;
    return s;
  }
  if (init != kSuccess) {
    std::string fix;
    const std::string files = DeviceFilesNote();
    switch (init) {
      case kErrorStubLibrary:
        fix = s.path + " is the CUDA toolkit's stub library, not the driver: take the toolkit's "
                       "stubs directory out of LD_LIBRARY_PATH";
        break;
      case kErrorSystemDriverMismatch:
        fix = "the driver library and the loaded kernel module are different versions: reboot "
              "after a driver update, or reinstall the driver";
        break;
      case kErrorCompatNotSupportedOnDevice:
        fix = "the CUDA forward-compatibility libraries in use do not support this GPU: take "
              "them out of LD_LIBRARY_PATH";
        break;
      case kErrorSystemNotReady:
        fix = "the system is not ready for CUDA: start nvidia-fabricmanager (NVSwitch systems) "
              "and check nvidia-smi";
        break;
      default:
        fix = files.empty()
                  ? "no GPU device file was found under " + dev_dir_ +
                        ": in a container, start it with the NVIDIA runtime (--gpus); check "
                        "nvidia-smi"
                  : files + ": check its permissions (the video/render group) and nvidia-smi";
    }
    s.status = Status::DeviceUnavailable("the CUDA driver cannot be initialised (cuInit: " +
                                         ErrorName(init) + "): " + fix);
    return s;
  }
  int count = 0;
  if (Status c = Check(api_.DeviceGetCount(&count), "cuDeviceGetCount"); !c.ok()) {
    s.status = c;
    return s;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice d = 0;
    if (Status c = Check(api_.DeviceGet(&d, i), "cuDeviceGet"); !c.ok()) {
      s.status = c;
      return s;
    }
    devices_.push_back(d);
  }
  contexts_.assign(count, nullptr);
  s.device_count = count;
  if (count == 0) s.no_device_reason = no_device;
  return s;
}

std::string Driver::ErrorName(CUresult r) const {
  const char* name = nullptr;
  if (api_.GetErrorName == nullptr || api_.GetErrorName(r, &name) != kSuccess || name == nullptr) {
    name = KnownErrorName(r);
  }
  return name != nullptr ? std::string(name) : "CUDA error " + std::to_string(r);
}

std::string Driver::ForkNote() const {
  const pid_t now = getpid();
  if (opened_pid_ == 0 || now == opened_pid_) return "";
  return "this process (pid " + std::to_string(now) + ") was forked from one that had " +
         "initialised CUDA (pid " + std::to_string(opened_pid_) + "), and a child made by fork " +
         "cannot use CUDA: start worker processes with the 'spawn' start method " +
         "(multiprocessing.set_start_method(\"spawn\"), or DataLoader(..., " +
         "multiprocessing_context=\"spawn\")), or use CUDA only after the fork";
}

Status Driver::Check(CUresult r, std::string_view what) const {
  if (r == kSuccess) return Status::Ok();
  if (r == kErrorNotInitialized || r == kErrorInvalidContext) {
    if (std::string fork = ForkNote(); !fork.empty()) {
      return Status::DeviceUnavailable(std::string(what) + ": " + ErrorName(r) + ": " + fork);
    }
  }
  const char* text = nullptr;
  if (api_.GetErrorString == nullptr || api_.GetErrorString(r, &text) != kSuccess) text = nullptr;
  std::string msg = std::string(what) + ": " + ErrorName(r);
  if (text != nullptr) msg += std::string(": ") + text;
  switch (r) {
    case kErrorOutOfMemory: return Status::OutOfMemory(std::move(msg));
    case kErrorInvalidDevice:
    case kErrorNoDevice: return Status::DeviceUnavailable(std::move(msg));
    default: return Status::DeviceError(std::move(msg));
  }
}

Result<CUcontext> Driver::PrimaryContext(int ordinal) {
  const DriverState& s = State();
  if (!s.status.ok()) return s.status;
  if (ordinal < 0 || ordinal >= s.device_count) {
    return Status::DeviceUnavailable(
        "cuda:" + std::to_string(ordinal) + " does not exist: this machine has " +
        (s.device_count == 0 ? "no CUDA device (" + s.no_device_reason + ")"
                             : std::to_string(s.device_count) + " CUDA device" +
                                   (s.device_count == 1 ? "" : "s")));
  }
  std::lock_guard<std::mutex> lock(ctx_mu_);
  if (contexts_[ordinal] == nullptr) {
    CUcontext ctx = nullptr;
    RCKPT_RETURN_IF_ERROR(Check(api_.DevicePrimaryCtxRetain(&ctx, devices_[ordinal]),
                                "cuDevicePrimaryCtxRetain(cuda:" + std::to_string(ordinal) + ")"));
    contexts_[ordinal] = ctx;
  }
  return contexts_[ordinal];
}

Result<int> Driver::CurrentOrdinal() {
  const DriverState& s = State();
  if (!s.status.ok()) return s.status;
  CUcontext ctx = nullptr;
  RCKPT_RETURN_IF_ERROR(Check(api_.CtxGetCurrent(&ctx), "cuCtxGetCurrent"));
  if (ctx == nullptr) return -1;
  CUdevice d = 0;
  RCKPT_RETURN_IF_ERROR(Check(api_.CtxGetDevice(&d), "cuCtxGetDevice"));
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == d) return static_cast<int>(i);
  }
  return Status::DeviceError("the calling thread's current context is of a device the driver "
                             "did not list (CUdevice " + std::to_string(d) + ")");
}

ScopedContext::ScopedContext(Driver& driver, int ordinal, std::string_view what) : driver_(driver) {
  Result<CUcontext> ctx = driver.PrimaryContext(ordinal);
  if (!ctx.ok()) {
    status_ = ctx.status().WithContext(std::string(what));
    return;
  }
  status_ = driver.Check(driver.api().CtxPushCurrent(*ctx), std::string(what) + ": cuCtxPushCurrent");
  pushed_ = status_.ok();
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  (void)driver_.api().CtxPopCurrent(&popped);
}

}  // namespace rckpt::cuda
