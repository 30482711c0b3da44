// The load pipeline: moves chunks from a checkpoint file into their
// destinations, overlapping reading, decoding and device copies.
//
//   read   : one pread per chunk on worker threads (as many in flight as
//            there are workers), in file order; from object storage a
//            device-bound chunk is fetched before its worker takes a staging
//            slot, so the requests in flight never wait for slots
//   decode : zstd on the same worker; host destinations are decoded (or, for
//            raw chunks, read) in place, with no staging copy
//   stage  : device destinations decode into a slot of the load's single
//            pinned StagingRing (staging_bytes, leased from the runtime's
//            pool: runtime/device_pool.h)
//   copy   : async host-to-device copy on one stream per device (leased
//            from the pool); an event after it returns the slot to the ring
//
// Nothing on a load's path frees device or pinned memory or makes a stream
// once the pool holds what the load needs: no call waits for the whole
// device.
//   shuffle: byte-shuffled chunks stay shuffled through the ring, land in a
//            per-device scratch buffer of one slot (the caller's
//            DeviceAllocator's, or the pool's), and the device
//            un-shuffles them into the destination (UnshuffleAsync), so the
//            CPU runs only zstd for them; where the device cannot
//            (DeviceRuntime::CanUnshuffle) or has no memory left for the
//            scratch, the worker un-shuffles into the slot instead
//   order  : each device's stream first waits for the caller's stream
//            (CallerStreams), so memory the caller's work still uses is
//            not overwritten
//
// A chunk larger than a slot (only when staging_bytes < 2 x the chunk size)
// is decoded into ordinary host memory first and streamed through the ring
// in slot-sized pieces: the pinned bound holds; host use grows by the chunk.
#ifndef RCKPT_SRC_ENGINE_PIPELINE_H_
#define RCKPT_SRC_ENGINE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/file_reader.h"
#include "rckpt/options.h"
#include "rckpt/runtime.h"

namespace rckpt {

class CallerStreams;

// Where one tensor's bytes go: host memory (device cpu) or memory of a CUDA
// device of the pipeline's runtime, `tensor->nbytes` long.
struct TensorDest {
  const TensorMeta* tensor = nullptr;
  Device device;
  void* data = nullptr;
  // `data` already holds the tensor's stored bytes: it points into
  // PipelineOptions::mapped_file (raw chunks only), so the pipeline only
  // verifies checksums.
  bool in_place = false;
};

struct PipelineOptions {
  DeviceRuntime* runtime = nullptr;  // required when any dest is a device
  bool verify_checksums = true;
  int threads = 0;  // 0: the process's share of its node (util/node.h)
  uint64_t staging_bytes = 64ull << 20;
  ProgressCallback progress;  // called on the calling thread
  // The whole file mapped into memory (RandomAccessFile::MapPrivate), or
  // null. When set, stored bytes are decoded straight from it: no pread, no
  // copy of compressed bytes.
  const std::byte* mapped_file = nullptr;
  // The call's caller streams (null: none); used on the calling thread.
  CallerStreams* caller = nullptr;
  // false: shuffled chunks bound for a device are un-shuffled on the host.
  bool device_unshuffle = true;
  // Makes the device un-shuffle scratch (one slot per device) when set, as
  // it makes the load's tensors (torch's caching allocator in Python);
  // otherwise it is leased from the runtime's pool.
  DeviceAllocator* device_allocator = nullptr;
};

struct PipelineStats {
  uint64_t bytes_read = 0;
  uint64_t bytes_restored = 0;
  uint64_t staging_high_water = 0;
  uint64_t staging_capacity = 0;  // 0 when no device destination
  uint64_t device_unshuffled_bytes = 0;  // shuffled bytes a device un-shuffled
  uint64_t host_unshuffled_bytes = 0;    // shuffled bytes bound for a device the host un-shuffled
  std::string host_unshuffle_reason;     // why, when host_unshuffled_bytes > 0
  // A copy into a destination could not be waited for (recording or
  // waiting on an event failed): on failure, the destinations may still be
  // written, so the caller must retire them (DevicePool::Retire), never
  // free or reuse them.
  bool unsettled = false;
};

// Fills every destination. On success all copies have completed. On failure
// (read error, Corruption, a failed copy, cancellation) the first error is
// returned after all outstanding work has stopped; the pipeline returns
// what it leased (ring, streams, scratch) either way, and the destinations'
// contents are unspecified. When work could not be waited for
// (stats->unsettled), what it may still use is retired in the runtime's
// pool instead of returned, and the error says why. A load that fails because a device was reset
// while the pool held its streams or memory (cudaDeviceReset) runs once
// more with fresh ones.
Status RunLoadPipeline(const FileReader& reader,
                       const std::vector<TensorDest>& dests,
                       const PipelineOptions& options, PipelineStats* stats);

// The file mapped for a load with `o.map_file` (RandomAccessFile::MapPrivate),
// or null: not asked for, or the file cannot be mapped (the load then reads
// as usual).
std::shared_ptr<std::byte> MapForLoad(const FileReader& reader, const LoadOptions& o);

// The pipeline settings a load with `o` uses (`mapped_file`: the file mapped
// for LoadOptions::map_file, or null; `caller`: the call's caller streams, or
// null).
PipelineOptions PipelineOptionsOf(const LoadOptions& o, DeviceRuntime& rt,
                                  const std::byte* mapped_file = nullptr,
                                  CallerStreams* caller = nullptr);

// Copies `n` host bytes at `src` to `dst` on `device`, after the caller's
// work on that device (when `caller` is not null), and waits for the copy.
// `keep` owns `src` and `dst`: when the copy cannot be waited for, it is
// retired in the runtime's pool (DevicePool::Retire; `forever` as there),
// so neither is freed while the copy may still use them.
Status UploadToDevice(DeviceRuntime& runtime, CallerStreams* caller, Device device, void* dst,
                      const std::byte* src, uint64_t n, std::shared_ptr<void> keep,
                      bool forever);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_PIPELINE_H_
