#include "engine/device_save.h"

#include <algorithm>
#include <cstring>
#include <deque>

namespace rckpt {

Result<std::unique_ptr<DeviceToHostStreamer>> DeviceToHostStreamer::Create(
    DeviceRuntime& runtime, uint64_t staging_bytes, uint64_t chunk_bytes) {
  if (staging_bytes == 0 || chunk_bytes == 0) {
    return Status::InvalidArgument(
        "device streaming: staging_bytes " + std::to_string(staging_bytes) +
        " and chunk_bytes " + std::to_string(chunk_bytes) +
        ", expected both >= 1");
  }
  const uint64_t slot =
      std::min(chunk_bytes, std::max<uint64_t>(staging_bytes / 2, 1));
  const uint64_t count = staging_bytes / slot;
  RCKPT_ASSIGN_OR_RETURN(void* base, runtime.AllocatePinned(slot * count));
  return std::unique_ptr<DeviceToHostStreamer>(
      new DeviceToHostStreamer(runtime, static_cast<std::byte*>(base), slot,
                               chunk_bytes, static_cast<int>(count)));
}

DeviceToHostStreamer::DeviceToHostStreamer(DeviceRuntime& runtime,
                                           std::byte* base, uint64_t slot_bytes,
                                           uint64_t chunk_bytes, int slots)
    : runtime_(runtime),
      base_(base),
      slot_bytes_(slot_bytes),
      chunk_bytes_(chunk_bytes) {
  for (int i = 0; i < slots; ++i) slots_.push_back(base + slot_bytes * i);
}

DeviceToHostStreamer::~DeviceToHostStreamer() {
  for (auto& [device, stream] : streams_)
    runtime_.DestroyStream(device, stream);
  runtime_.FreePinned(base_);
}

Result<Stream> DeviceToHostStreamer::StreamFor(Device device) {
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  RCKPT_ASSIGN_OR_RETURN(Stream s, runtime_.CreateStream(device));
  streams_[device] = s;
  return s;
}

Status DeviceToHostStreamer::StreamTensor(const TensorView& src,
                                          const DeviceChunkSink& sink,
                                          uint64_t chunk_bytes) {
  const uint64_t chunk = chunk_bytes > 0 ? chunk_bytes : chunk_bytes_;
  const uint64_t total = src.nbytes();
  if (total == 0) return Status::Ok();
  RCKPT_ASSIGN_OR_RETURN(Stream stream, StreamFor(src.device));
  const auto* device_bytes = static_cast<const std::byte*>(src.data);

  // A piece is at most one slot and never crosses a chunk boundary.
  struct Piece {
    uint64_t offset;  // in the tensor
    uint64_t bytes;
    int slot;
    Event event;
  };
  std::deque<Piece> in_flight;
  std::vector<int> free_slots;
  for (int i = static_cast<int>(slots_.size()) - 1; i >= 0; --i) {
    free_slots.push_back(i);
  }
  uint64_t next = 0;  // first byte not yet enqueued
  Status status;

  auto piece_end = [&](uint64_t offset) {
    const uint64_t chunk_end =
        std::min(total, (offset / chunk + 1) * chunk);
    return std::min(chunk_end, offset + slot_bytes_);
  };
  auto enqueue_more = [&]() -> Status {
    while (next < total && !free_slots.empty()) {
      const uint64_t end = piece_end(next);
      const int slot = free_slots.back();
      RCKPT_RETURN_IF_ERROR(runtime_.CopyToHostAsync(
          src.device, stream, slots_[slot], device_bytes + next, end - next));
      RCKPT_ASSIGN_OR_RETURN(Event event,
                             runtime_.RecordEvent(src.device, stream));
      free_slots.pop_back();
      in_flight.push_back(Piece{next, end - next, slot, event});
      high_water_ = std::max<uint64_t>(
          high_water_, (slots_.size() - free_slots.size()) * slot_bytes_);
      next = end;
    }
    return Status::Ok();
  };

  while (status.ok() && (next < total || !in_flight.empty())) {
    status = enqueue_more();
    if (!status.ok() || in_flight.empty()) break;
    Piece p = in_flight.front();
    in_flight.pop_front();
    status = runtime_.WaitEvent(p.event);
    runtime_.DestroyEvent(p.event);
    if (status.ok()) {
      const uint64_t chunk_begin = p.offset / chunk * chunk;
      const uint64_t chunk_size = std::min(chunk, total - chunk_begin);
      const std::byte* bytes = slots_[p.slot];
      if (chunk_size <= slot_bytes_) {
        status = sink(chunk_begin, {bytes, p.bytes});
      } else {
        if (assembly_.size() < chunk_size) assembly_.resize(chunk_size);
        std::memcpy(assembly_.data() + (p.offset - chunk_begin), bytes,
                    p.bytes);
        if (p.offset + p.bytes == chunk_begin + chunk_size) {
          status = sink(chunk_begin, {assembly_.data(), chunk_size});
        }
      }
    }
    free_slots.push_back(p.slot);
  }
  // Nothing may still write into the ring once Stream returns.
  for (Piece& p : in_flight) {
    Status s = runtime_.WaitEvent(p.event);
    runtime_.DestroyEvent(p.event);
    if (status.ok()) status = s;
  }
  if (!status.ok()) {
    Status ignored = runtime_.Synchronize(src.device, stream);
  }
  return status;
}

}  // namespace rckpt
