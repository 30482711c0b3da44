// Reading device tensors for Save: device-to-host copies through one pinned
// staging ring, so saving a GPU-resident model never needs a full host copy.
//
// Use (the writer, once per save that has device tensors):
//
//   RCKPT_ASSIGN_OR_RETURN(auto streamer,
//       DeviceToHostStreamer::Create(runtime, options.staging_bytes,
//                                    options.chunk_bytes));
//   for each device tensor t:
//     RCKPT_RETURN_IF_ERROR(streamer->StreamTensor(t.view(),
//         [&](uint64_t offset, std::span<const std::byte> bytes) {
//           // bytes = raw [offset, offset + bytes.size()) of t, one writer
//           // chunk (offset is a multiple of chunk_bytes); valid only during
//           // this call: shuffle / compress / copy it before returning.
//           return Status::Ok();
//         }));
//
// While the sink runs on one chunk, the copies of the following chunks are
// already in flight (as many as the ring has slots). When staging_bytes is
// smaller than 2 x chunk_bytes, a chunk is copied in slot-sized pieces and
// assembled in ordinary host memory of chunk_bytes before the sink sees it.
//
// Thread-safety: one streamer is used by one thread at a time.
#ifndef RCKPT_SRC_ENGINE_DEVICE_SAVE_H_
#define RCKPT_SRC_ENGINE_DEVICE_SAVE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "rckpt/runtime.h"
#include "rckpt/tensor.h"

namespace rckpt {

// Receives one chunk's raw bytes; a non-OK status stops the stream and is
// returned by StreamTensor.
using DeviceChunkSink =
    std::function<Status(uint64_t offset, std::span<const std::byte> bytes)>;

class DeviceToHostStreamer {
 public:
  // Allocates the ring (one AllocatePinned of at most staging_bytes, slots of
  // min(chunk_bytes, staging_bytes / 2)). InvalidArgument for a zero
  // staging_bytes or chunk_bytes; OutOfMemory when the allocation fails.
  static Result<std::unique_ptr<DeviceToHostStreamer>> Create(
      DeviceRuntime& runtime, uint64_t staging_bytes, uint64_t chunk_bytes);
  ~DeviceToHostStreamer();  // destroys its streams, frees the ring
  DeviceToHostStreamer(const DeviceToHostStreamer&) = delete;
  DeviceToHostStreamer& operator=(const DeviceToHostStreamer&) = delete;

  // Streams all of `src` (on a CUDA device of the runtime) to `sink` in
  // chunk order. Returns the sink's first error, or the runtime's
  // (DeviceError, DeviceUnavailable); all copies have completed when it
  // returns, either way.
  // `chunk_bytes` > 0 overrides the streamer's chunk size for this tensor
  // (the writer rounds chunks down to whole elements).
  Status StreamTensor(const TensorView& src, const DeviceChunkSink& sink,
                      uint64_t chunk_bytes = 0);

  uint64_t capacity() const { return slot_bytes_ * slots_.size(); }
  uint64_t high_water() const { return high_water_; }

 private:
  DeviceToHostStreamer(DeviceRuntime& runtime, std::byte* base,
                       uint64_t slot_bytes, uint64_t chunk_bytes, int slots);
  Result<Stream> StreamFor(Device device);

  DeviceRuntime& runtime_;
  std::byte* const base_;
  const uint64_t slot_bytes_;
  const uint64_t chunk_bytes_;
  std::vector<std::byte*> slots_;
  std::map<Device, Stream> streams_;
  std::vector<std::byte> assembly_;  // when a chunk spans several slots
  uint64_t high_water_ = 0;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_DEVICE_SAVE_H_
