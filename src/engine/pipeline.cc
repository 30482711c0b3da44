#include "engine/pipeline.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>

#include "codec/codec.h"
#include "engine/staging_ring.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace {

struct Job {
  const TensorDest* dest;
  size_t chunk;
};

// The async work of one device: a stream, the lock that keeps a chunk's
// copy + unshuffle + event together in stream order, and the scratch buffer
// shuffled chunks land in before the device un-shuffles them. One scratch
// suffices because the stream is in order: the next copy into it is queued
// behind the previous un-shuffle.
struct DeviceLane {
  Device device;
  Stream stream;
  bool has_stream = false;
  std::mutex mu;
  void* scratch = nullptr;
};

// Reusable host buffers for stored (compressed) bytes and decode scratch;
// as many exist as workers ever ran at once.
class BufferPool {
 public:
  struct Buffers {
    std::vector<std::byte> stored;
    std::vector<std::byte> scratch;
  };
  std::unique_ptr<Buffers> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return std::make_unique<Buffers>();
    std::unique_ptr<Buffers> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Give(std::unique_ptr<Buffers> b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(b));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Buffers>> free_;
};

std::string ChunkWhere(const TensorMeta& t, size_t chunk) {
  return "tensor '" + t.name + "': chunk " + std::to_string(chunk) +
         " at offset " + std::to_string(t.chunks[chunk].offset);
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

class LoadRun {
 public:
  LoadRun(const FileReader& reader, const PipelineOptions& options)
      : reader_(reader), options_(options) {}

  Status Run(const std::vector<TensorDest>& dests, PipelineStats* stats);

 private:
  Status SetUpDevices(const std::vector<TensorDest>& dests);
  Status TearDownDevices();
  void RunJob(const Job& job);
  Status DoJob(const Job& job);
  Status ReadAndDecode(const TensorMeta& t, size_t ci, std::span<std::byte> dst,
                       bool keep_shuffled);
  Status DeviceChunk(const TensorDest& dest, size_t ci);
  Status CopyFromSlot(DeviceLane& lane, std::byte* dst, StagingRing::Slot slot,
                      uint32_t shuffle_elem);
  void Fail(Status s);

  const FileReader& reader_;
  const PipelineOptions& options_;
  std::unique_ptr<StagingRing> ring_;
  std::map<int, std::unique_ptr<DeviceLane>> lanes_;
  BufferPool buffers_;

  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Status error_;
  size_t jobs_done_ = 0;
  uint64_t bytes_done_ = 0;
};

void LoadRun::Fail(Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(s);
  failed_ = true;
}

Status LoadRun::ReadAndDecode(const TensorMeta& t, size_t ci,
                              std::span<std::byte> dst, bool keep_shuffled) {
  const ChunkMeta& c = t.chunks[ci];
  if (c.codec == Codec::kNone && (c.shuffle_elem == 0 || keep_shuffled)) {
    // Stored bytes are the wanted bytes: read them in place.
    if (c.stored_size != dst.size()) {
      return Status::Corruption(
          ChunkWhere(t, ci) + ": stored size " + std::to_string(c.stored_size) +
          " of an uncompressed chunk, expected raw size " +
          std::to_string(dst.size()));
    }
    RCKPT_RETURN_IF_ERROR(reader_.file().ReadAt(c.offset, dst));
    bytes_read_ += c.stored_size;
    if (options_.verify_checksums) {
      const uint64_t sum = Checksum(dst);
      if (sum != c.checksum) {
        return Status::Corruption(ChunkWhere(t, ci) +
                                  ": checksum mismatch: expected " +
                                  Hex(c.checksum) + ", computed " + Hex(sum));
      }
    }
    return Status::Ok();
  }
  std::unique_ptr<BufferPool::Buffers> b = buffers_.Take();
  b->stored.resize(c.stored_size);
  Status s = reader_.ReadStored(c, b->stored);
  if (s.ok()) {
    bytes_read_ += c.stored_size;
    s = reader_.DecodeChunk(t, ci, b->stored, dst, b->scratch,
                            options_.verify_checksums, keep_shuffled);
  }
  buffers_.Give(std::move(b));
  return s;
}

Status LoadRun::CopyFromSlot(DeviceLane& lane, std::byte* dst,
                             StagingRing::Slot slot, uint32_t shuffle_elem) {
  DeviceRuntime& rt = *options_.runtime;
  std::lock_guard<std::mutex> lock(lane.mu);
  Status s;
  bool enqueued = false;
  if (shuffle_elem >= 2) {
    if (lane.scratch == nullptr) {
      Result<void*> scratch = rt.Allocate(lane.device, ring_->slot_bytes());
      if (!scratch.ok()) {
        ring_->Release(slot);
        return scratch.status().WithContext("device un-shuffle scratch");
      }
      lane.scratch = *scratch;
    }
    s = rt.CopyToDeviceAsync(lane.device, lane.stream, lane.scratch, slot.data,
                             slot.bytes);
    if (s.ok()) {
      enqueued = true;
      s = rt.UnshuffleAsync(lane.device, lane.stream, dst, lane.scratch,
                            slot.bytes, shuffle_elem);
    }
  } else {
    s = rt.CopyToDeviceAsync(lane.device, lane.stream, dst, slot.data,
                             slot.bytes);
    enqueued = s.ok();
  }
  Result<Event> event =
      s.ok() ? rt.RecordEvent(lane.device, lane.stream) : Result<Event>(s);
  if (!event.ok()) {
    // The slot may still be read by an enqueued copy: let it finish first.
    if (enqueued) Status ignored = rt.Synchronize(lane.device, lane.stream);
    ring_->Release(slot);
    return event.status();
  }
  ring_->Retire(slot, *event);
  return Status::Ok();
}

Status LoadRun::DeviceChunk(const TensorDest& dest, size_t ci) {
  const TensorMeta& t = *dest.tensor;
  const ChunkMeta& c = t.chunks[ci];
  DeviceLane& lane = *lanes_.at(dest.device.index);
  std::byte* dst = static_cast<std::byte*>(dest.data) + c.tensor_offset;
  if (c.raw_size <= ring_->slot_bytes()) {
    RCKPT_ASSIGN_OR_RETURN(StagingRing::Slot slot, ring_->Acquire(c.raw_size));
    const bool shuffled = c.shuffle_elem >= 2;
    Status s = ReadAndDecode(t, ci, {slot.data, c.raw_size}, shuffled);
    if (!s.ok()) {
      ring_->Release(slot);
      return s;
    }
    return CopyFromSlot(lane, dst, slot, shuffled ? c.shuffle_elem : 0);
  }
  // Larger than a slot: decode (and un-shuffle) on the host, then stream the
  // raw bytes through the ring piece by piece.
  std::unique_ptr<std::byte[]> whole(new (std::nothrow) std::byte[c.raw_size]);
  if (whole == nullptr) {
    return Status::OutOfMemory(ChunkWhere(t, ci) + ": " +
                               std::to_string(c.raw_size) +
                               " bytes of host memory to decode it");
  }
  RCKPT_RETURN_IF_ERROR(ReadAndDecode(t, ci, {whole.get(), c.raw_size}, false));
  for (uint64_t off = 0; off < c.raw_size; off += ring_->slot_bytes()) {
    if (failed_) return Status::Ok();  // someone else's error wins
    const uint64_t n = std::min(ring_->slot_bytes(), c.raw_size - off);
    RCKPT_ASSIGN_OR_RETURN(StagingRing::Slot slot, ring_->Acquire(n));
    std::memcpy(slot.data, whole.get() + off, n);
    RCKPT_RETURN_IF_ERROR(CopyFromSlot(lane, dst + off, slot, 0));
  }
  return Status::Ok();
}

Status LoadRun::DoJob(const Job& job) {
  const TensorDest& dest = *job.dest;
  const TensorMeta& t = *dest.tensor;
  const ChunkMeta& c = t.chunks[job.chunk];
  if (dest.device.is_cpu()) {
    std::byte* dst = static_cast<std::byte*>(dest.data) + c.tensor_offset;
    return ReadAndDecode(t, job.chunk, {dst, c.raw_size}, false);
  }
  return DeviceChunk(dest, job.chunk);
}

void LoadRun::RunJob(const Job& job) {
  Status s;
  if (!failed_) {
    try {
      s = DoJob(job);
    } catch (const std::bad_alloc&) {
      s = Status::OutOfMemory(ChunkWhere(*job.dest->tensor, job.chunk) +
                              ": out of host memory");
    }
  }
  if (!s.ok()) Fail(s);
  std::lock_guard<std::mutex> lock(mu_);
  ++jobs_done_;
  bytes_done_ += job.dest->tensor->chunks[job.chunk].raw_size;
  cv_.notify_all();
}

Status LoadRun::SetUpDevices(const std::vector<TensorDest>& dests) {
  uint64_t max_chunk = 0;
  for (const TensorDest& d : dests) {
    if (d.device.is_cpu()) continue;
    if (options_.runtime == nullptr) {
      return Status::InvalidArgument("tensor '" + d.tensor->name +
                                     "': destination " + d.device.ToString() +
                                     " needs a device runtime");
    }
    for (const ChunkMeta& c : d.tensor->chunks) {
      max_chunk = std::max(max_chunk, c.raw_size);
    }
    if (lanes_.count(d.device.index) == 0) {
      auto lane = std::make_unique<DeviceLane>();
      lane->device = d.device;
      lanes_[d.device.index] = std::move(lane);
    }
  }
  if (lanes_.empty()) return Status::Ok();
  for (auto& [index, lane] : lanes_) {
    Result<Stream> stream = options_.runtime->CreateStream(lane->device);
    if (!stream.ok()) return stream.status();
    lane->stream = *stream;
    lane->has_stream = true;
  }
  RCKPT_ASSIGN_OR_RETURN(
      ring_, StagingRing::Create(*options_.runtime, options_.staging_bytes,
                                 std::max<uint64_t>(max_chunk, 1)));
  return Status::Ok();
}

Status LoadRun::TearDownDevices() {
  Status first;
  if (ring_ != nullptr) first = ring_->Drain();
  for (auto& [index, lane] : lanes_) {
    if (!lane->has_stream) continue;
    Status s = options_.runtime->Synchronize(lane->device, lane->stream);
    if (first.ok()) first = s;
    if (lane->scratch != nullptr) {
      options_.runtime->Free(lane->device, lane->scratch);
    }
    options_.runtime->DestroyStream(lane->device, lane->stream);
  }
  lanes_.clear();
  return first;
}

Status LoadRun::Run(const std::vector<TensorDest>& dests,
                    PipelineStats* stats) {
  Status setup = SetUpDevices(dests);
  if (!setup.ok()) {
    Status ignored = TearDownDevices();
    ring_.reset();
    return setup;
  }

  std::vector<Job> jobs;
  uint64_t total = 0;
  for (const TensorDest& d : dests) {
    for (size_t ci = 0; ci < d.tensor->chunks.size(); ++ci) {
      jobs.push_back(Job{&d, ci});
      total += d.tensor->chunks[ci].raw_size;
    }
  }
  // File order keeps the reads sequential on disk.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    return a.dest->tensor->chunks[a.chunk].offset <
           b.dest->tensor->chunks[b.chunk].offset;
  });

  {
    ThreadPool pool(ResolveThreads(options_.threads));
    for (const Job& job : jobs) {
      pool.Submit([this, job] { RunJob(job); });
    }
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t reported = UINT64_MAX;
    while (jobs_done_ < jobs.size()) {
      cv_.wait(lock);
      if (options_.progress && bytes_done_ != reported && error_.ok()) {
        reported = bytes_done_;
        lock.unlock();
        const bool go_on = options_.progress(reported, total);
        lock.lock();
        if (!go_on && error_.ok()) {
          error_ = Status::IoError("cancelled");
          failed_ = true;
        }
      }
    }
  }  // the pool joins here

  Status teardown = TearDownDevices();
  if (stats != nullptr) {
    stats->bytes_read = bytes_read_;
    stats->bytes_restored = error_.ok() && teardown.ok() ? total : bytes_done_;
    stats->staging_high_water = ring_ ? ring_->high_water() : 0;
    stats->staging_capacity = ring_ ? ring_->capacity() : 0;
  }
  ring_.reset();
  if (!error_.ok()) return error_;
  return teardown;
}

}  // namespace

Status RunLoadPipeline(const FileReader& reader,
                       const std::vector<TensorDest>& dests,
                       const PipelineOptions& options, PipelineStats* stats) {
  LoadRun run(reader, options);
  return run.Run(dests, stats);
}

}  // namespace rckpt
