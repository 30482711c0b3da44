// The host-emulated multi-device runtime, with the testing hooks the engine's
// tests use to check where memory went and that nothing leaked.
#ifndef RCKPT_SRC_RUNTIME_EMULATED_RUNTIME_H_
#define RCKPT_SRC_RUNTIME_EMULATED_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "rckpt/runtime.h"

namespace rckpt {

struct EmulatedRuntimeOptions {
  int device_count = 1;
  // > 0: the n-th copy (counted over all streams, from 1) fails on its
  // worker with DeviceError; the failure surfaces at WaitEvent/Synchronize.
  int fail_after_copies = 0;
  // Per-device memory; an Allocate past it returns OutOfMemory.
  uint64_t device_memory_bytes = UINT64_MAX;
  // false: UnshuffleAsync is unavailable (CanUnshuffle says so), as on a
  // GPU the kernel image cannot load on; the engine un-shuffles on the host.
  bool device_unshuffle = true;
};

// N "CUDA" devices backed by host memory. Each device allocation is a
// separate host allocation tracked per device; every copy and unshuffle
// checks that its device pointers lie inside live allocations of the stream's
// device (DeviceError otherwise, as CUDA reports an invalid pointer), and
// runs on the stream's own worker thread in submission order. Each device
// has a default stream (Stream{nullptr}), made on first use.
class EmulatedRuntime : public DeviceRuntime {
 public:
  ~EmulatedRuntime() override = default;

  // Testing hooks. Counts are of live (not yet freed) objects.
  virtual int device_count() const = 0;
  virtual int LiveAllocations(int device) const = 0;
  virtual uint64_t LiveBytes(int device) const = 0;
  virtual int LivePinned() const = 0;
  virtual int LiveStreams() const = 0;
  virtual int LiveEvents() const = 0;
  // Frees of a pointer that is not a live allocation of the named device.
  virtual int BadFrees() const = 0;
  // The device whose live allocation contains `ptr`, if any.
  virtual std::optional<int> DeviceOf(const void* ptr) const = 0;
  // Copies executed so far (successful or not).
  virtual uint64_t CopiesExecuted() const = 0;
  // Un-shuffles executed so far on the devices.
  virtual uint64_t UnshufflesExecuted() const = 0;
  // Makes `device` the calling thread's current device (CurrentDevice()),
  // as cudaSetDevice does.
  virtual void SetCurrentDevice(int device) = 0;
  // Holds `stream` of `device`: work queued on it from now on runs only
  // once the returned token is released (destroyed), as work behind a long
  // kernel would. For tests of ordering against a caller's stream.
  virtual std::shared_ptr<void> HoldStream(Device device, Stream stream) = 0;

  // True when nothing allocated through this runtime is still alive once
  // its pool (what loads and saves keep for the next call) is released.
  bool NothingLive();
};

std::unique_ptr<EmulatedRuntime> NewEmulatedRuntimeForTesting(
    const EmulatedRuntimeOptions& options);

}  // namespace rckpt

#endif  // RCKPT_SRC_RUNTIME_EMULATED_RUNTIME_H_
