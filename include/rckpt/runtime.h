// DeviceRuntime: the one interface between rckpt's engine and device memory.
//
// Three implementations exist:
//   - the host runtime: no CUDA devices; always built;
//   - the CUDA runtime (cuda/): the CUDA driver API, loaded at run time from
//     libcuda.so.1 (the library every NVIDIA driver installs), so every build
//     uses the machine's GPUs whether or not a CUDA toolkit was present when
//     rckpt was built. It works in the primary context of each device, the one
//     torch and the CUDA runtime use, and leaves every thread's current
//     context as it found it;
//   - the emulated runtime: N "CUDA" devices backed by separate host
//     allocations whose copies run asynchronously on worker threads, so every
//     placement and the whole streaming pipeline can be tried without a GPU.
//
// Handles (streams, events, pointers) are opaque; no CUDA header is needed.
// A Stream whose handle is null is the device's default stream (CUDA's
// legacy default stream, torch's default current stream); a runtime's own
// streams never are.
//
// Thread-safety: every method may be called from any thread concurrently.
#ifndef RCKPT_RUNTIME_H_
#define RCKPT_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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

// The caller's stream on a device: where the work that produces a saved
// tensor, or reads a restored one, runs (in Python, torch's current stream of
// that device). Called on the calling thread, at most once per device and
// call. A save reads a device's tensors only after the work queued on its
// stream so far, without synchronising the device; a load writes only after
// it (the memory it fills may have been in use there), and the stream sees
// every byte of a load before the load returns. An error fails the call
// before any device work is queued. Unset: the runtime's streams alone order
// the work (a C++ caller that synchronised its own work needs nothing more).
using CallerStream = std::function<Result<Stream>(Device device)>;

// What a runtime's pool holds (DeviceRuntime::PoolStats): the pinned
// staging memory, device scratch, streams and events that loads and saves
// lease instead of making and freeing their own on every call, and how many
// of each were ever made (constant once the pool has grown to what the
// process's calls need).
struct DevicePoolStats {
  uint64_t pinned_bytes = 0;          // pinned host memory held (idle and leased)
  uint64_t pinned_cap = 0;            // the most pinned_bytes may reach
  uint64_t device_scratch_bytes = 0;  // device memory held, all devices
  int streams = 0;                    // streams held, all devices
  int events = 0;                     // events held, all devices
  uint64_t pinned_allocations = 0;    // pinned blocks ever allocated
  uint64_t device_allocations = 0;    // scratch buffers ever allocated
  uint64_t streams_created = 0;
  uint64_t events_created = 0;
  // Leases past the cap, served with ordinary (unpinned) host memory.
  uint64_t unpinned_leases = 0;
  // Memory a call could not wait for (recording or waiting on an event
  // failed, so a copy may still use it): kept out of reuse, never freed
  // while a copy may use it, until ReleasePool finds its device settled.
  int retired = 0;              // held now
  uint64_t retired_bytes = 0;   // held now (pinned, scratch and other memory)
  uint64_t retirements = 0;     // ever
};

// The pinned pool's cap unless a runtime is given another
// (CudaRuntimeOptions::pinned_pool_bytes; for the process's CUDA runtime,
// the environment variable RCKPT_PINNED_POOL_BYTES).
inline constexpr uint64_t kDefaultPinnedPoolBytes = 512ull << 20;

class DevicePool;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // "host", "cuda", "emulated(N)".
  virtual std::string_view name() const = 0;

  // The number of CUDA-type devices this runtime can use. 0 means there is
  // no GPU, and NoDeviceReason() says which of the three reasons holds: no
  // driver library (libcuda.so.1 absent, e.g. a container started without
  // the NVIDIA runtime), CUDA_VISIBLE_DEVICES hiding every device, or a
  // driver that reports no device. A driver or device that is present but
  // unusable (initialisation fails, a driver older than rckpt needs, no
  // permission) is an error, DeviceUnavailable, naming the cause and the
  // fix; it is never reported as 0 devices.
  // The CUDA runtime initialises the driver on the first call (not before:
  // a process that never asks can fork children that use CUDA).
  virtual Result<int> DeviceCount() = 0;
  // Why DeviceCount() is 0 ("" when it is not, or was not asked yet).
  virtual std::string NoDeviceReason() = 0;

  // The calling thread's current CUDA device: the device of its current
  // context (torch.cuda.set_device and, from CUDA 12, cudaSetDevice make
  // it); on a thread with none, the launcher's local rank (LOCAL_RANK,
  // OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID) when it
  // names a visible device, else 0, the first visible device. What
  // model_device "auto" and a bare "cuda" resolve to in C++.
  // REQUIRES: DeviceCount() > 0.
  virtual Result<int> CurrentDevice() = 0;

  // Device memory on `device` (a CUDA device). OutOfMemory when it cannot be
  // had, DeviceUnavailable for a device index that does not exist.
  virtual Result<void*> Allocate(Device device, uint64_t bytes) = 0;
  virtual void Free(Device device, void* ptr) = 0;

  // Page-locked host memory usable as the source/target of async copies of
  // every device (plain aligned memory for the host and emulated runtimes).
  // `device` is the CUDA device whose context allocates it.
  virtual Result<void*> AllocatePinned(Device device, uint64_t bytes) = 0;
  virtual void FreePinned(void* ptr) = 0;

  // A stream orders async work on one device. A runtime's own streams do not
  // synchronise with the default stream; use events (StreamWaitEvent).
  virtual Result<Stream> CreateStream(Device device) = 0;
  virtual void DestroyStream(Device device, Stream stream) = 0;

  // Asynchronous copies in stream order. The source/target host buffer must
  // stay valid until an event recorded after the copy has completed.
  virtual Status CopyToDeviceAsync(Device device, Stream stream, void* dst,
                                   const void* src, uint64_t bytes) = 0;
  virtual Status CopyToHostAsync(Device device, Stream stream, void* dst,
                                 const void* src, uint64_t bytes) = 0;

  // Whether UnshuffleAsync runs on `device`. When it does not (the CUDA
  // runtime's kernel image cannot load on this driver or GPU, the reason in
  // `*why_not`), byte-shuffled data must be un-shuffled on the host before
  // it is copied.
  virtual bool CanUnshuffle(Device device, std::string* why_not) = 0;
  // Reverses a byte-shuffle filter in device memory (a kernel on CUDA):
  // `src` holds `bytes` shuffled with element size `elem_size`; writes the
  // unshuffled bytes to `dst`. `dst` and `src` must not overlap.
  // Unsupported when CanUnshuffle(device) is false.
  virtual Status UnshuffleAsync(Device device, Stream stream, void* dst,
                                const void* src, uint64_t bytes,
                                uint32_t elem_size) = 0;

  // Events mark a point in a stream.
  virtual Result<Event> RecordEvent(Device device, Stream stream) = 0;
  // Later work on `stream` waits until `event` has completed (no host
  // blocking). The event may be of another stream of the same device.
  virtual Status StreamWaitEvent(Device device, Stream stream, Event event) = 0;
  // Blocks until the event's work is done; returns the error of any failed
  // work before it (DeviceError).
  virtual Status WaitEvent(Event event) = 0;
  virtual void DestroyEvent(Event event) = 0;

  // Blocks until all work on the stream is done (the CUDA runtime waits on
  // an event recorded after it, sleeping, not spinning; when the event
  // cannot be recorded, on the stream itself). An error means the work
  // failed or could not be waited for: memory its copies use may still be
  // in use, and must not be reused or freed (DevicePool::Retire).
  virtual Status Synchronize(Device device, Stream stream) = 0;

  // Whether no work of `device` can still use memory: every stream of the
  // device ran what was queued on it, or its context failed for good (a
  // sticky error: the driver runs nothing more in it). Waits for the whole
  // device; only for freeing memory whose own wait failed. The host and
  // emulated runtimes' waits never fail without waiting: true.
  virtual bool DeviceSettled(Device device);

  // The runtime's pool (src/runtime/device_pool.h), from which loads and
  // saves lease pinned staging, device scratch and streams; null for a
  // runtime without one (each call then makes and frees its own).
  virtual DevicePool* pool() { return nullptr; }
  // What the pool holds now and has ever made.
  virtual DevicePoolStats PoolStats();
  // Frees what the pool holds that no call is using now (cuMemFreeHost,
  // cuMemFree and stream and event destruction, each of which waits for
  // the device); what calls in flight use is freed as they end. Later calls
  // build the pool anew. The process's CUDA runtime does this at exit too,
  // tolerating a driver already shut down (CUDA_ERROR_DEINITIALIZED).
  virtual void ReleasePool();
};

// The process-wide host runtime (0 CUDA devices).
DeviceRuntime& HostRuntime();

// A runtime emulating `device_count` CUDA devices (0 when negative) in host
// memory: separate allocations per device, asynchronous copies on worker
// threads, streams and events with the CUDA runtime's ordering. For trying
// placements and device paths on machines without a GPU (the CLI's and the
// Python package's --emulate-devices / emulate_devices).
std::unique_ptr<DeviceRuntime> NewEmulatedRuntime(int device_count);

// The oldest driver the CUDA runtime works with, as cuDriverGetVersion
// reports it (1000 * major + 10 * minor): every driver API entry point it
// resolves exists from CUDA 11.4 (driver R470) on. Below it, DeviceCount()
// is DeviceUnavailable naming both versions.
inline constexpr int kMinCudaDriverVersion = 11040;
// The oldest driver that loads the shipped un-shuffle kernel image: its
// cubins are made by a CUDA 12 nvcc (cuda/unshuffle_kernels.fatbin.txt), and
// cubins of a CUDA 12.x toolkit run on every driver of CUDA 12.0 (R525) or
// newer (minor version compatibility), the drivers GPU fleets run. Below it,
// byte-shuffled chunks are un-shuffled on the host (CanUnshuffle). The test
// cuda.KernelImageIsCurrent holds it to the stamp's toolkit.
inline constexpr int kMinKernelDriverVersion = 12000;
// The driver branch that brought kMinKernelDriverVersion, for messages.
inline constexpr const char* kMinKernelDriverBranch = "R525";

struct CudaRuntimeOptions {
  // The driver library to load: a name the dynamic loader searches for, or
  // a path. Another path is for drivers installed outside the loader's
  // search path (and for testing against a stand-in driver).
  std::string driver_library = "libcuda.so.1";
  // The cap of the runtime's pinned pool (DevicePoolStats::pinned_cap).
  uint64_t pinned_pool_bytes = kDefaultPinnedPoolBytes;
};

// A CUDA runtime over the driver library of `options`. Creating it loads
// nothing: the library is opened and the driver initialised on the first
// call that needs a device. Unsupported when rckpt was built without it
// (RCKPT_ENABLE_CUDA=OFF). The runtime must outlive every tensor, stream
// and pinned buffer it made.
Result<std::unique_ptr<DeviceRuntime>> NewCudaRuntime(const CudaRuntimeOptions& options);

// The process's CUDA runtime over libcuda.so.1 (never destroyed; its pool
// is released at exit). Its pinned pool's cap is RCKPT_PINNED_POOL_BYTES
// (bytes, read once when it is made) when that is set, else
// kDefaultPinnedPoolBytes. Unsupported when rckpt was built without it.
Result<DeviceRuntime*> CudaRuntime();

// The CUDA runtime when rckpt was built with it, else the host runtime.
// Choosing it touches no driver: a process with no GPU sees 0 devices (with
// the reason) the first time it asks.
DeviceRuntime& DefaultRuntime();

}  // namespace rckpt

#endif  // RCKPT_RUNTIME_H_
