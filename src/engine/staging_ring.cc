#include "engine/staging_ring.h"

#include <algorithm>

namespace rckpt {

Result<std::unique_ptr<StagingRing>> StagingRing::Create(DevicePool& pool, DeviceRuntime& runtime,
                                                         Device device,
                                                         uint64_t capacity,
                                                         uint64_t max_piece) {
  if (capacity == 0) {
    return Status::InvalidArgument("staging_bytes: 0, expected at least 1");
  }
  // Alignment keeps slots on separate cache lines and DMA-friendly. The
  // largest piece is rounded up, never down: a slot a few bytes short of it
  // would send that piece (and its un-shuffle) through the host.
  constexpr uint64_t kSlotAlign = 4096;
  uint64_t half = std::max<uint64_t>(capacity / 2, 1);
  if (half > kSlotAlign) half = half / kSlotAlign * kSlotAlign;
  uint64_t piece = max_piece > 0 ? max_piece : half;
  if (piece > kSlotAlign) piece = (piece + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  const uint64_t slot = std::min(piece, half);
  const uint64_t count = std::max<uint64_t>(capacity / slot, 1);
  RCKPT_ASSIGN_OR_RETURN(DevicePool::Lease memory, pool.LeasePinned(device, slot * count));
  return std::unique_ptr<StagingRing>(
      new StagingRing(pool, runtime, std::move(memory), slot, static_cast<int>(count)));
}

StagingRing::StagingRing(DevicePool& pool, DeviceRuntime& runtime, DevicePool::Lease memory,
                         uint64_t slot_bytes, int slot_count)
    : pool_(pool), runtime_(runtime), memory_(std::move(memory)), slot_bytes_(slot_bytes) {
  std::byte* const base = memory_.data();
  slots_.reserve(slot_count);
  for (int i = 0; i < slot_count; ++i) {
    slots_.push_back(Slot{i, base + slot_bytes * i, 0});
    free_.push_back(slot_count - 1 - i);  // hand out slot 0 first
  }
}

StagingRing::~StagingRing() {
  Status ignored = Drain();
  if (abandoned_) pool_.Retire(std::move(memory_));
}

uint64_t StagingRing::high_water() const {
  std::lock_guard<std::mutex> lock(mu_);
  return high_water_;
}

void StagingRing::FreeLocked(const Slot& slot) {
  in_use_ -= slot.bytes;
  free_.push_back(slot.index);
  cv_.notify_all();
}

void StagingRing::RecycleOldest(std::unique_lock<std::mutex>& lock) {
  InFlight oldest = in_flight_.front();
  in_flight_.pop_front();
  lock.unlock();
  Status s = runtime_.WaitEvent(oldest.event);
  runtime_.DestroyEvent(oldest.event);
  lock.lock();
  if (s.ok()) {
    FreeLocked(oldest.slot);
    return;
  }
  // Whether the copy ran is unknown: the slot stays out of use.
  if (error_.ok()) error_ = s;
  abandoned_ = true;
  cv_.notify_all();
}

Result<StagingRing::Slot> StagingRing::Acquire(uint64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!error_.ok()) return error_;
    if (!free_.empty()) {
      Slot slot = slots_[free_.back()];
      free_.pop_back();
      slot.bytes = bytes;
      in_use_ += bytes;
      high_water_ = std::max(high_water_, in_use_);
      return slot;
    }
    if (!in_flight_.empty()) {
      RecycleOldest(lock);
      continue;
    }
    // Every slot is held by a worker that has not retired it yet.
    cv_.wait(lock);
  }
}

void StagingRing::Retire(Slot slot, Event event) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.push_back(InFlight{slot, event});
  cv_.notify_all();
}

void StagingRing::Release(Slot slot) {
  std::lock_guard<std::mutex> lock(mu_);
  FreeLocked(slot);
}

void StagingRing::Abandon(Slot /*slot*/, Status cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(cause);
  abandoned_ = true;
  cv_.notify_all();
}

Status StagingRing::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!in_flight_.empty()) RecycleOldest(lock);
  return error_;
}

}  // namespace rckpt
