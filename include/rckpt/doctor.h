// Doctor: what rckpt sees of this machine's GPUs, and whether its device
// path is usable. `rckpt doctor` and rckpt.doctor() print it.
//
// Running it loads the CUDA driver and initialises it, lists every visible
// device with context-free queries (name, UUID, memory, bus id, compute
// capability), and examines only the process's own device as a first load
// onto it would: retains its primary context, loads the un-shuffle kernel
// there and pins a staging-sized buffer through that context. No other
// device's context is made (eight ranks running the doctor make no context
// on each other's GPUs), unless every device is asked for (all_devices).
//
// Thread-safety: RunDoctor may be called from any thread.
#ifndef RCKPT_DOCTOR_H_
#define RCKPT_DOCTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rckpt/runtime.h"
#include "rckpt/status.h"

namespace rckpt {

struct DoctorDevice {
  int index = 0;           // cuda:N as rckpt (and torch, in the same process) numbers it
  std::string uuid;        // 8-4-4-4-12 hex, as torch prints it (nvidia-smi adds GPU-/MIG-)
  std::string name;
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;  // "0000:1A:00.0"; MIG instances share their GPU's
  int compute_major = 0;
  int compute_minor = 0;
  // Whether this device was examined (the process's own, or every device
  // with all_devices); the kernel fields below say nothing otherwise.
  bool examined = false;
  bool kernel_loads = false;  // the un-shuffle kernel runs on it
  std::string kernel_note;    // why not, when it does not
};

struct DoctorReport {
  std::string rckpt_version;
  bool cuda_built = false;       // built with the CUDA runtime
  std::string kernel_image;      // the shipped kernel image's architectures
  // The oldest driver that loads it (kMinKernelDriverVersion), and why.
  int kernel_min_driver_version = 0;
  std::string kernel_min_driver_why;
  std::string driver_library;    // as asked for
  std::string driver_path;       // the file loaded ("" when none was)
  int driver_version = 0;        // cuDriverGetVersion (0: none)
  bool cuda_visible_devices_set = false;
  std::string cuda_visible_devices;
  std::string cuda_device_order;  // "" when unset (the driver's default, FASTEST_FIRST)
  std::vector<DoctorDevice> devices;
  // The process's own device, the one examined: the calling thread's
  // current device (in Python, torch's), else the launcher's local rank's,
  // else cuda:0 (DeviceRuntime::CurrentDevice); -1 with no GPU.
  int current_device = -1;
  bool all_devices = false;      // every device was examined
  std::string no_device_reason;  // when there is no GPU
  // Not OK when a GPU is present but rckpt cannot use it: the cause and
  // the fix. A machine without a GPU is not a problem.
  Status problem;
  // Pinned (page-locked) host memory: the memlock limits (UINT64_MAX:
  // unlimited) and a trial allocation of the default staging ring's size.
  uint64_t memlock_soft = 0;
  uint64_t memlock_hard = 0;
  uint64_t pinned_probe_bytes = 0;  // 0 when not tried (no GPU)
  Status pinned_probe;
  uint64_t host_memory_bytes = 0;
  uint64_t host_memory_available = 0;
  // The process's runtime's pool (DefaultRuntime().PoolStats()): what it
  // holds for loads and saves, and the pinned cap. Asking touches no driver.
  DevicePoolStats pool;
};

struct DoctorOptions {
  // Examine every visible device (a context, the kernel and a pinned
  // allocation on each), not only the process's own.
  bool all_devices = false;
  // The device to examine instead of the calling thread's current one
  // (Python passes torch.cuda.current_device()); -1: the current one.
  int device = -1;
};

// Examines the driver library of `options`. Always returns a report; its
// `problem` says whether the device path is usable.
DoctorReport RunDoctor(const CudaRuntimeOptions& options = {},
                       const DoctorOptions& doctor = {});

}  // namespace rckpt

#endif  // RCKPT_DOCTOR_H_
