// Driver: one CUDA driver library, opened, checked and initialised on first
// use, with the primary context of each device it hands out.
//
// Opening it decides, once, which of these holds:
//   - usable: N >= 1 devices;
//   - no GPU (0 devices and the reason): the library is absent, the driver
//     reports no device, or CUDA_VISIBLE_DEVICES hides every device;
//   - unusable (an error naming the cause and the fix): the library loads
//     but lacks entry points or is older than kMinCudaDriverVersion, cuInit
//     fails, or the GPU's device files exist while the library is missing.
//
// Thread-safety: every method may be called from any thread.
#ifndef RCKPT_CUDA_DRIVER_H_
#define RCKPT_CUDA_DRIVER_H_

#include <sys/types.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "driver_api.h"
#include "rckpt/status.h"

namespace rckpt::cuda {

// "CUDA 12.4" for a cuDriverGetVersion number (12040).
std::string VersionText(int version);

struct DriverState {
  Status status;               // not OK: unusable, with the cause and the fix
  int device_count = 0;        // 0 with status OK: no GPU
  std::string no_device_reason;
  int version = 0;             // cuDriverGetVersion; 0 when not known
  std::string path;            // the file the library was loaded from
};

class Driver {
 public:
  // `library`: a name or path for dlopen. `dev_dir`: where the GPU's device
  // files (nvidiactl, nvidia0, ...) are looked for when explaining a failure.
  explicit Driver(std::string library, std::string dev_dir = "/dev");
  // Releases the retained primary contexts (not the library: other users of
  // the process may hold it, and libcuda is never unloaded safely).
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Opens and initialises the driver on the first call; later calls return
  // the same state.
  const DriverState& State();

  // REQUIRES: State().status.ok() && State().device_count > 0.
  const DriverApi& api() const { return api_; }
  // The driver's name for `r` ("CUDA_ERROR_OUT_OF_MEMORY"), or its number.
  std::string ErrorName(CUresult r) const;
  // OK for success; else OutOfMemory, DeviceUnavailable (no/invalid device;
  // CUDA_ERROR_NOT_INITIALIZED in a child forked after the driver was
  // opened, with the cause and the fix) or DeviceError, with "<what>:
  // <error name>: <driver's text>".
  Status Check(CUresult r, std::string_view what) const;
  // Why CUDA cannot work in this process when it is a child forked after
  // the driver was opened; "" otherwise.
  std::string ForkNote() const;

  // The primary context of device `ordinal`, retained on first use and
  // released by ~Driver. DeviceUnavailable for an ordinal that does not exist.
  Result<CUcontext> PrimaryContext(int ordinal);
  // The ordinal of the calling thread's current context's device, or -1
  // when the thread has no current context.
  Result<int> CurrentOrdinal();

 private:
  DriverState Open();
  Status Resolve(void* handle, const DriverState& s);
  std::string DeviceFilesNote() const;

  const std::string library_;
  const std::string dev_dir_;
  pid_t opened_pid_ = 0;  // the process that opened the driver
  std::once_flag open_once_;
  DriverState state_;
  DriverApi api_{};

  std::mutex ctx_mu_;
  std::vector<CUdevice> devices_;    // by ordinal
  std::vector<CUcontext> contexts_;  // by ordinal; null until retained
};

// A device's primary context made current on the calling thread for the
// scope, and the previous current context restored after it.
class ScopedContext {
 public:
  // Check status() before using the context.
  ScopedContext(Driver& driver, int ordinal, std::string_view what);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const { return status_; }

 private:
  Driver& driver_;
  bool pushed_ = false;
  Status status_;
};

}  // namespace rckpt::cuda

#endif  // RCKPT_CUDA_DRIVER_H_
