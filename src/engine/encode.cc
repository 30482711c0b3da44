// The save engine's encoder: tensors are cut into chunks, batches of chunks
// are encoded on worker threads (device bytes staged through pinned memory,
// each chunk by format/chunk_codec.h's EncodeChunk, whose mirror is the
// reader's DecodeChunk), and the stored bytes are handed in file order to
// the format's ChunkWriter.

#include "engine/encode.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <map>
#include <set>

#include "codec/codec.h"
#include "engine/caller_streams.h"
#include "format/chunk_codec.h"
#include "format/writer.h"
#include "rckpt/runtime.h"
#include "runtime/device_pool.h"
#include "util/free_list.h"
#include "util/host_memory.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace {

struct ChunkJob {
  size_t source = 0;
  uint64_t tensor_offset = 0;
  uint64_t raw_size = 0;
};

// Consecutive chunks encoded as one task: one chunk of kBatchBytes or more,
// or smaller chunks up to kBatchBytes (and kBatchChunks) together. A task
// costs a queue push, a wake-up and a slot hand-off; with one task per chunk
// a save of 20 000 1 KiB tensors took 4-26 us per tensor on a 2-core VM
// (the spread is wake-up latency), batched 1-2 us.
struct Batch {
  size_t first_job = 0;
  size_t end_job = 0;
  uint64_t raw_bytes = 0;
};
constexpr uint64_t kBatchBytes = 1ull << 20;
constexpr size_t kBatchChunks = 1024;

struct EncodedChunk {
  ChunkMeta meta;
  std::span<const std::byte> stored;
};

// The working memory of one batch in flight.
struct Slot {
  std::byte* staging = nullptr;  // device-to-host landing area (pinned)
  // A stream per device the slot's batches read from, leased from the
  // runtime's pool when first needed; each has waited for the caller's work.
  std::map<Device, DevicePool::Lease> streams;
  ScratchBuffer compressed;      // the batch's zstd frames
  std::vector<EncodedChunk> chunks;
  Status status;
  bool done = false;
  // A wait for the slot's copies failed: they may still write its staging.
  bool unsettled = false;
};

Status WorkBufferOom(uint64_t bytes) {
  return Status::OutOfMemory("save work buffer of " + std::to_string(bytes) + " bytes");
}

class RegionEncoder {
 public:
  RegionEncoder(std::span<const SaveSource> sources, const SaveOptions& o)
      : sources_(sources), o_(o) {}

  Status Run(WritableFile& file, uint64_t start_offset, EncodedRegion* region) {
    ChunkWriter out(file, start_offset, o_.alignment);
    RCKPT_RETURN_IF_ERROR(PlanChunks());
    RCKPT_RETURN_IF_ERROR(WriteChunks(out));
    RCKPT_RETURN_IF_ERROR(out.Flush());
    region->chunks = std::move(chunks_);
    region->first_chunk = std::move(first_chunk_);
    region->end = out.offset();
    return Status::Ok();
  }

  // The end of the region at `start_offset` if every chunk were stored raw.
  Result<uint64_t> RawEnd(uint64_t start_offset) {
    RCKPT_RETURN_IF_ERROR(PlanChunks());
    uint64_t end = start_offset;
    for (const ChunkJob& job : jobs_) {
      end = ChunkOffset(end, job.raw_size, o_.alignment) + job.raw_size;
    }
    return end;
  }

 private:
  Status PlanChunks() {
    first_chunk_.resize(sources_.size());
    for (size_t t = 0; t < sources_.size(); ++t) {
      const Tensor& tensor = *sources_[t].tensor;
      auto bytes = ShapeBytes(tensor.shape(), tensor.dtype());
      if (!bytes.ok()) {
        return bytes.status().WithContext("tensor '" + std::string(sources_[t].name) + "'");
      }
      if (*bytes > 0 && tensor.data() == nullptr) {
        return Status::InvalidArgument("tensor '" + std::string(sources_[t].name) +
                                       "' has no data");
      }
      if (!tensor.device().is_cpu() && !has_device_tensor_) {
        has_device_tensor_ = true;
        first_device_ = tensor.device();
      }
      uint64_t elem = DTypeSize(tensor.dtype());
      uint64_t step = std::max<uint64_t>(elem, o_.chunk_bytes / elem * elem);
      first_chunk_[t] = jobs_.size();
      for (uint64_t off = 0; off < *bytes; off += step) {
        jobs_.push_back(ChunkJob{t, off, std::min(step, *bytes - off)});
        total_bytes_ += std::min(step, *bytes - off);
        max_chunk_ = std::max(max_chunk_, std::min(step, *bytes - off));
      }
    }
    // A batch of device chunks lands in one slot's staging buffer, which
    // holds max_chunk_ bytes.
    const uint64_t limit = has_device_tensor_ ? std::min(kBatchBytes, max_chunk_) : kBatchBytes;
    uint64_t bound = 0;  // sum of ZstdBound over the current batch's chunks
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const uint64_t raw = jobs_[j].raw_size;
      if (batches_.empty() || batches_.back().raw_bytes + raw > limit ||
          j - batches_.back().first_job >= kBatchChunks) {
        batches_.push_back(Batch{j, j, 0});
        bound = 0;
      }
      batches_.back().end_job = j + 1;
      batches_.back().raw_bytes += raw;
      bound += ZstdBound(raw);
      max_batch_bound_ = std::max(max_batch_bound_, bound);
    }
    return Status::Ok();
  }

  // Runs on a worker: produce the stored bytes of one batch's chunks.
  void Encode(const Batch& batch, Slot& slot, DeviceRuntime* runtime) {
    slot.chunks.clear();
    slot.status = EncodeBatch(batch, slot, runtime);
  }

  // The batch's device chunks copied into the slot's staging: every copy
  // enqueued first, then one wait per stream (a blocking event: the worker
  // sleeps), whatever failed, so that no copy still writes into the staging
  // once the batch is done.
  Status StageDeviceChunks(const Batch& batch, Slot& slot, DeviceRuntime& rt) {
    std::set<Device> used;
    Status status;
    uint64_t pos = 0;
    for (size_t j = batch.first_job; j < batch.end_job && status.ok(); ++j) {
      const ChunkJob& job = jobs_[j];
      const Tensor& t = *sources_[job.source].tensor;
      if (!t.device().is_cpu()) {
        Result<Stream> stream = StreamOf(rt, slot, t.device());
        status = stream.status();
        if (status.ok()) {
          used.insert(t.device());
          status = rt.CopyToHostAsync(t.device(), *stream, slot.staging + pos,
                                      static_cast<const std::byte*>(t.data()) + job.tensor_offset,
                                      job.raw_size);
        }
      }
      pos += job.raw_size;
    }
    for (const Device& d : used) {
      Status s = rt.Synchronize(d, slot.streams.at(d).stream());
      if (!s.ok()) slot.unsettled = true;
      if (status.ok()) status = s;
    }
    return status;
  }

  // The slot's stream on `device`, leased on first use; it first waits for
  // the caller's work on that device (ready_: an event after it).
  Result<Stream> StreamOf(DeviceRuntime& rt, Slot& slot, Device device) {
    auto it = slot.streams.find(device);
    if (it != slot.streams.end()) return it->second.stream();
    RCKPT_ASSIGN_OR_RETURN(DevicePool::Lease lease, (*pool_)->LeaseStream(device));
    const Stream stream = lease.stream();
    slot.streams.emplace(device, std::move(lease));
    if (auto e = ready_.find(device); e != ready_.end()) {
      RCKPT_RETURN_IF_ERROR(rt.StreamWaitEvent(device, stream, e->second));
    }
    return stream;
  }

  Status EncodeBatch(const Batch& batch, Slot& slot, DeviceRuntime* runtime) {
    const bool zstd = o_.codec == Codec::kZstd;
    if (zstd && !slot.compressed.Reserve(max_batch_bound_)) return WorkBufferOom(max_batch_bound_);
    if (runtime != nullptr) RCKPT_RETURN_IF_ERROR(StageDeviceChunks(batch, slot, *runtime));
    std::unique_ptr<ScratchBuffer> scratch;  // the shuffle's output, taken when needed
    uint64_t pos = 0;                  // of this chunk's raw bytes in the batch
    uint64_t frame_pos = 0;            // of its frame in slot.compressed
    Status status;
    for (size_t j = batch.first_job; j < batch.end_job && status.ok(); ++j) {
      const ChunkJob& job = jobs_[j];
      const SaveSource& source = sources_[job.source];
      const Tensor& t = *source.tensor;
      std::span<const std::byte> raw;
      if (t.device().is_cpu()) {
        raw = {static_cast<const std::byte*>(t.data()) + job.tensor_offset, job.raw_size};
      } else {
        raw = {slot.staging + pos, job.raw_size};
      }
      EncodedChunk& out = slot.chunks.emplace_back();
      out.meta.tensor_offset = job.tensor_offset;
      const uint32_t elem = ShuffleElemFor(t.dtype(), o_.codec, o_.shuffle);
      std::span<std::byte> shuffled;
      if (elem != 0) {
        if (scratch == nullptr) scratch = shuffle_buffers_.Take();
        if (!scratch->Reserve(max_chunk_)) {
          status = WorkBufferOom(max_chunk_);
          break;
        }
        shuffled = {scratch->data(), raw.size()};
      }
      std::span<std::byte> frame;
      if (zstd) {
        frame = {slot.compressed.data() + frame_pos, EncodedBound(o_.codec, raw.size())};
        frame_pos += frame.size();
      }
      auto stored = EncodeChunk(raw, o_.codec, o_.level, elem, shuffled, frame, &out.meta);
      if (!stored.ok()) {
        status = stored.status().WithContext("tensor '" + std::string(source.name) + "'");
        break;
      }
      out.stored = *stored;
      pos += job.raw_size;
    }
    if (scratch != nullptr) shuffle_buffers_.Give(std::move(scratch));
    return status;
  }

  Status WriteChunks(ChunkWriter& out) {
    int threads = ResolveThreads(o_.threads);
    size_t window = static_cast<size_t>(threads) * 2 + 2;
    DeviceRuntime* runtime = nullptr;
    if (has_device_tensor_) {
      runtime = o_.runtime ? o_.runtime : &DefaultRuntime();
      pool_.emplace(*runtime);
      // The pinned staging bounds host memory for device tensors.
      window = std::clamp<size_t>(o_.staging_bytes / std::max<uint64_t>(max_chunk_, 1), 1, window);
    }
    window = std::min(window, std::max<size_t>(batches_.size(), 1));
    // Every slot's staging is a share of one lease from the runtime's pool,
    // returned (with the slots' streams) when the save ends.
    DevicePool::Lease staging;
    std::vector<Slot> slots(window);
    Status status;
    auto free_staging = [&] {
      for (const auto& [device, event] : ready_) runtime->DestroyEvent(event);
      ready_.clear();
    };
    if (has_device_tensor_) {
      // On the calling thread, before any copy: an event after the caller's
      // work on every device a tensor is on, which the copy streams wait for.
      CallerStreams caller(*runtime, o_.caller_stream);
      for (const SaveSource& source : sources_) {
        const Device d = source.tensor->device();
        if (d.is_cpu() || !caller.active() || ready_.count(d) != 0) continue;
        Result<Event> e = caller.Mark(d);
        if (!e.ok()) {
          free_staging();
          return e.status();
        }
        ready_.emplace(d, *e);
      }
      Result<DevicePool::Lease> lease = (*pool_)->LeasePinned(first_device_, window * max_chunk_);
      if (!lease.ok()) {
        free_staging();
        return lease.status().WithContext("pinned staging buffer");
      }
      staging = std::move(*lease);
      for (size_t i = 0; i < slots.size(); ++i) slots[i].staging = staging.data() + i * max_chunk_;
    }
    {
      std::mutex mu;
      std::condition_variable cv;
      ThreadPool pool(threads);
      auto submit = [&](size_t j) {
        Slot& slot = slots[j % window];
        slot.done = false;
        pool.Submit([&, j] {
          Slot& s = slots[j % window];
          Encode(batches_[j], s, runtime);
          std::lock_guard<std::mutex> lock(mu);
          s.done = true;
          cv.notify_all();
        });
      };
      size_t next_submit = 0;
      for (; next_submit < std::min(window, batches_.size()); ++next_submit) submit(next_submit);
      uint64_t done_bytes = 0;
      for (size_t j = 0; j < batches_.size() && status.ok(); ++j) {
        Slot& slot = slots[j % window];
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return slot.done; });
        }
        if (!slot.status.ok()) { status = slot.status; break; }
        for (EncodedChunk& chunk : slot.chunks) {
          Result<uint64_t> at = out.Append(chunk.stored);
          if (!at.ok()) {
            status = at.status();
            break;
          }
          chunk.meta.offset = *at;
          chunks_.push_back(chunk.meta);
          done_bytes += chunk.meta.raw_size;
          if (o_.progress && !o_.progress(done_bytes, total_bytes_)) {
            status = Status::IoError("save cancelled by the progress callback");
            break;
          }
        }
        if (status.ok() && next_submit < batches_.size()) submit(next_submit++);
      }
      // The pool's destructor waits for chunks still in flight.
    }
    // Staging a copy may still write (its wait failed) is retired, with the
    // streams of the slots it failed in, never handed to the next call.
    bool unsettled = false;
    for (Slot& slot : slots) {
      if (!slot.unsettled) continue;
      unsettled = true;
      for (auto& [device, lease] : slot.streams) (*pool_)->Retire(std::move(lease));
    }
    if (unsettled) (*pool_)->Retire(std::move(staging));
    if (has_device_tensor_) free_staging();
    if (status.ok() && o_.progress && jobs_.empty() && !o_.progress(0, 0)) {
      status = Status::IoError("save cancelled by the progress callback");
    }
    return status;
  }

  std::span<const SaveSource> sources_;
  const SaveOptions& o_;
  std::vector<ChunkJob> jobs_;
  std::vector<Batch> batches_;
  std::vector<ChunkMeta> chunks_;
  std::vector<uint64_t> first_chunk_;
  uint64_t total_bytes_ = 0;
  uint64_t max_chunk_ = 0;
  uint64_t max_batch_bound_ = 0;  // the most bytes a batch's zstd frames can take
  bool has_device_tensor_ = false;
  Device first_device_;  // of the first device tensor (whose context pins the staging)
  std::map<Device, Event> ready_;  // written before the workers start
  std::optional<PoolFor> pool_;    // the runtime's, when a tensor is on a device
  // Shuffle output buffers are per worker, not per slot: a worker needs one
  // only while it encodes, and there are fewer workers than slots.
  FreeList<ScratchBuffer> shuffle_buffers_;
};

}  // namespace

std::vector<SaveSource> SaveSourcesOf(const Checkpoint& ck) {
  std::vector<SaveSource> sources;
  for (const TensorEntry& e : ck.tensors()) sources.push_back({&e.tensor, e.name});
  for (const ShardedTensorEntry& e : ck.sharded_tensors()) {
    for (const TensorShard& s : e.shards) sources.push_back({&s.block, e.name});
  }
  return sources;
}

Status EncodeRegion(std::span<const SaveSource> sources, const SaveOptions& options,
                    WritableFile& file, uint64_t start_offset, EncodedRegion* region) {
  RegionEncoder encoder(sources, options);
  return encoder.Run(file, start_offset, region);
}

Result<uint64_t> RawRegionEnd(std::span<const SaveSource> sources, const SaveOptions& options,
                              uint64_t start_offset) {
  RegionEncoder encoder(sources, options);
  return encoder.RawEnd(start_offset);
}

}  // namespace rckpt
