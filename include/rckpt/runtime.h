// DeviceRuntime: the one interface between rckpt's engine and device memory.
//
// Three implementations exist: the host runtime (no CUDA devices; always
// built), the CUDA runtime (cuda/, built when the toolkit is found; reports
// zero devices and never crashes without a driver or GPU), and an emulated
// runtime with N "CUDA" devices backed by separate host allocations whose
// copies run asynchronously on worker threads, so every placement and the
// whole streaming pipeline can be tested without a GPU.
//
// Handles (streams, events, pointers) are opaque; no CUDA header is needed.
//
// Thread-safety: every method may be called from any thread concurrently.
#ifndef RCKPT_RUNTIME_H_
#define RCKPT_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "rckpt/device.h"
#include "rckpt/status.h"

namespace rckpt {

struct Stream {
  void* handle = nullptr;
};
struct Event {
  void* handle = nullptr;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // "host", "cuda", "emulated(N)".
  virtual std::string_view name() const = 0;

  // Number of usable CUDA-type devices (0 for the host runtime, and for the
  // CUDA runtime on a machine without a driver or GPU).
  virtual int DeviceCount() = 0;

  // Device memory on `device` (a CUDA device). OutOfMemory when it cannot be
  // had, DeviceUnavailable for a device index that does not exist.
  virtual Result<void*> Allocate(Device device, uint64_t bytes) = 0;
  virtual void Free(Device device, void* ptr) = 0;

  // Page-locked host memory usable as the source/target of async copies
  // (plain aligned memory for the host and emulated runtimes).
  virtual Result<void*> AllocatePinned(uint64_t bytes) = 0;
  virtual void FreePinned(void* ptr) = 0;

  // A stream orders async work on one device.
  virtual Result<Stream> CreateStream(Device device) = 0;
  virtual void DestroyStream(Device device, Stream stream) = 0;

  // Asynchronous copies in stream order. The source/target host buffer must
  // stay valid until an event recorded after the copy has completed.
  virtual Status CopyToDeviceAsync(Device device, Stream stream, void* dst,
                                   const void* src, uint64_t bytes) = 0;
  virtual Status CopyToHostAsync(Device device, Stream stream, void* dst,
                                 const void* src, uint64_t bytes) = 0;

  // Reverses a byte-shuffle filter in device memory (a kernel on CUDA):
  // `src` holds `bytes` shuffled with element size `elem_size`; writes the
  // unshuffled bytes to `dst`. `dst` and `src` must not overlap.
  virtual Status UnshuffleAsync(Device device, Stream stream, void* dst,
                                const void* src, uint64_t bytes,
                                uint32_t elem_size) = 0;

  // Events mark a point in a stream.
  virtual Result<Event> RecordEvent(Device device, Stream stream) = 0;
  // Blocks until the event's work is done; returns the error of any failed
  // work before it (DeviceError).
  virtual Status WaitEvent(Event event) = 0;
  virtual void DestroyEvent(Event event) = 0;

  // Blocks until all work on the stream is done.
  virtual Status Synchronize(Device device, Stream stream) = 0;
};

// The process-wide host runtime (0 CUDA devices).
DeviceRuntime& HostRuntime();

// A runtime emulating `device_count` CUDA devices (0 when negative) in host
// memory: separate allocations per device, asynchronous copies on worker
// threads, streams and events with the CUDA runtime's ordering. For trying
// placements and device paths on machines without a GPU (the CLI's and the
// Python package's --emulate-devices / emulate_devices).
std::unique_ptr<DeviceRuntime> NewEmulatedRuntime(int device_count);

// The CUDA runtime. Unsupported when rckpt was built without CUDA. On a
// machine without driver or GPU it succeeds and reports 0 devices.
Result<DeviceRuntime*> CudaRuntime();

// The CUDA runtime when it is built and sees at least one device, otherwise
// the host runtime.
DeviceRuntime& DefaultRuntime();

}  // namespace rckpt

#endif  // RCKPT_RUNTIME_H_
