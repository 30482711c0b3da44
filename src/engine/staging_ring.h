// StagingRing: the pinned host staging memory of one load, leased from its
// runtime's pool (runtime/device_pool.h) for the load and cut into equal
// slots. A worker acquires a slot, fills it, enqueues an
// async copy from it and retires it with an event; the slot becomes free
// again when that event has completed. A slot whose copy could not be
// waited for (recording or waiting on its event failed) never becomes free:
// the ring's error is sticky from then on, and the ring's memory goes to
// the pool's retired memory (DevicePool::Retire), not back for reuse.
//
// Thread-safety: all methods may be called concurrently. A worker must hold
// at most one slot at a time (then the ring always makes progress).
#ifndef RCKPT_SRC_ENGINE_STAGING_RING_H_
#define RCKPT_SRC_ENGINE_STAGING_RING_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "rckpt/runtime.h"
#include "runtime/device_pool.h"

namespace rckpt {

class StagingRing {
 public:
  struct Slot {
    int index = -1;
    std::byte* data = nullptr;
    uint64_t bytes = 0;  // in use, <= slot_bytes()
  };

  // Slot size: `max_piece` (above 4 KiB rounded up to a multiple of 4 KiB,
  // so that the largest piece always fits a slot), capped at capacity / 2
  // (above 4 KiB rounded down to 4 KiB), so that at least two slots overlap
  // filling and copying; never 0. The slot count is capacity / slot size.
  // One lease of slot count * slot size <= capacity bytes from `pool`
  // (pinned by `device`'s context, usable by copies of every device; past
  // the pool's cap, ordinary host memory), returned when the ring goes.
  // OutOfMemory when it cannot be had.
  static Result<std::unique_ptr<StagingRing>> Create(DevicePool& pool, DeviceRuntime& runtime,
                                                     Device device,
                                                     uint64_t capacity,
                                                     uint64_t max_piece);
  // Waits for what is in flight; returns the memory to the pool, or retires
  // it there when a copy from it could not be waited for.
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t capacity() const { return slot_bytes_ * slots_.size(); }
  // Peak of the bytes in use (acquired or in flight) over the ring's life.
  uint64_t high_water() const;

  // Blocks until a slot is free, waiting on the oldest in-flight event when
  // none is. Returns that event's error (DeviceError) if it failed; the
  // error is sticky: every later Acquire returns it too.
  // REQUIRES: bytes <= slot_bytes().
  Result<Slot> Acquire(uint64_t bytes);
  // The slot's copy was enqueued; `event` follows it. Takes the event.
  void Retire(Slot slot, Event event);
  // The slot was not used for a copy (or its copy is known complete).
  void Release(Slot slot);
  // A copy from the slot was enqueued and could not be waited for (`cause`):
  // the slot is never handed out again, and `cause` becomes the ring's
  // sticky error.
  void Abandon(Slot slot, Status cause);
  // Waits for every in-flight slot; returns the first error seen.
  Status Drain();

 private:
  struct InFlight {
    Slot slot;
    Event event;
  };
  StagingRing(DevicePool& pool, DeviceRuntime& runtime, DevicePool::Lease memory,
              uint64_t slot_bytes, int slot_count);
  void FreeLocked(const Slot& slot);
  // Waits (unlocked) for the oldest in-flight slot and frees it; records its
  // error. REQUIRES: `lock` holds mu_ and in_flight_ is not empty.
  void RecycleOldest(std::unique_lock<std::mutex>& lock);

  DevicePool& pool_;
  DeviceRuntime& runtime_;
  DevicePool::Lease memory_;
  const uint64_t slot_bytes_;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> free_;
  std::deque<InFlight> in_flight_;
  uint64_t in_use_ = 0;
  uint64_t high_water_ = 0;
  Status error_;
  bool abandoned_ = false;  // a slot a copy may still read: the memory is retired
};

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_STAGING_RING_H_
