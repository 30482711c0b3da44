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
};

// N "CUDA" devices backed by host memory. Each device allocation is a
// separate host allocation tracked per device; every copy and unshuffle
// checks that its device pointers lie inside live allocations of the stream's
// device (DeviceError otherwise, as CUDA reports an invalid pointer), and
// runs on the stream's own worker thread in submission order.
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

  // True when nothing allocated through this runtime is still alive.
  bool NothingLive() const;
};

std::unique_ptr<EmulatedRuntime> NewEmulatedRuntimeForTesting(
    const EmulatedRuntimeOptions& options);

}  // namespace rckpt

#endif  // RCKPT_SRC_RUNTIME_EMULATED_RUNTIME_H_
