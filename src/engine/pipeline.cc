#include "engine/pipeline.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "codec/codec.h"
#include "engine/caller_streams.h"
#include "engine/device_alloc.h"
#include "engine/staging_ring.h"
#include "runtime/device_pool.h"
#include "util/free_list.h"
#include "util/host_memory.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace {

// One chunk of one destination.
struct Item {
  const TensorDest* dest;
  size_t chunk;
};

// Items [begin, end) of the file-ordered item list, run by one worker. A job
// of several items holds small host chunks that lie close together in the
// file: they are read with one pread (or straight from the mapping) and
// their bookkeeping (one task, one wake-up) is paid once, which is what a
// checkpoint of thousands of small tensors spends its time on otherwise.
struct Job {
  size_t begin;
  size_t end;
};

// Chunks up to kBatchChunkBytes may share a job, whose read spans at most
// kBatchSpanBytes and skips at most kBatchGapBytes of padding between them.
constexpr uint64_t kBatchChunkBytes = 256ull << 10;
constexpr uint64_t kBatchSpanBytes = 1ull << 20;
constexpr uint64_t kBatchGapBytes = 4096;

// The calling thread is woken to report progress every kProgressStep bytes
// (and at the end or on failure), not after every chunk.
constexpr uint64_t kProgressStep = 4ull << 20;

// One device's share of a load: a stream and the un-shuffle scratch, both
// leased from the runtime's pool (the scratch from the caller's
// DeviceAllocator when there is one), returned when the load ends.
struct DeviceLane {
  Device device;
  Stream stream;
  bool has_stream = false;
  DevicePool::Lease stream_lease;
  DevicePool::Lease scratch_lease;
  Tensor scratch_tensor;          // the allocator's scratch
  bool device_unshuffle = false;  // UnshuffleAsync runs on this device
  bool has_shuffled = false;      // a shuffled chunk goes to this device
  std::string why_host;           // why the host un-shuffles, when !device_unshuffle
  std::mutex mu;
  void* scratch = nullptr;        // one slot; made by SetUpDevices
  bool unsettled = false;         // a wait on the stream failed (under mu, or after the workers)
};

constexpr std::string_view kScratchName = "(device un-shuffle scratch)";

// Host work space of one worker: stored (compressed) bytes and decode
// scratch. Borrowed per job from a FreeList, so as many exist as workers
// ever ran at once; never zero-filled, large ones huge-page blocks.
struct Buffers {
  ScratchBuffer stored;
  ScratchBuffer scratch;
};

class LoadRun {
 public:
  LoadRun(const FileReader& reader, const PipelineOptions& options)
      : reader_(reader), options_(options) {}

  Status Run(const std::vector<TensorDest>& dests, PipelineStats* stats);

 private:
  Status SetUpDevices(const std::vector<TensorDest>& dests);
  Status TearDownDevices();
  std::vector<Job> MakeJobs() const;
  void RunJob(const Job& job);
  Status DoJob(const Job& job, Buffers& b);
  Status Decode(const TensorMeta& t, size_t ci, std::span<std::byte> dst,
                const std::byte* stored, bool keep_shuffled, bool in_place,
                Buffers& b);
  Status VerifyRaw(const TensorMeta& t, size_t ci,
                   std::span<const std::byte> raw) const;
  // Reads (stored == null) or copies `dst.size()` stored bytes of chunk `ci`
  // into `dst`, verifying them unless verification is off.
  Status ReadStoredBytes(const TensorMeta& t, size_t ci, std::span<std::byte> dst,
                         const std::byte* stored);
  Status DeviceChunk(const TensorDest& dest, size_t ci, Buffers& b);
  Status CopyFromSlot(DeviceLane& lane, std::byte* dst, StagingRing::Slot slot,
                      uint32_t shuffle_elem);
  void Fail(Status s);
  void NoteHostUnshuffle(const std::string& why);

  const ChunkMeta& ChunkOf(const Item& it) const {
    return it.dest->tensor->chunks[it.chunk];
  }
  // The chunk's stored bytes when the file is mapped, else null.
  const std::byte* Mapped(const ChunkMeta& c) const {
    return options_.mapped_file != nullptr ? options_.mapped_file + c.offset
                                           : nullptr;
  }

  const FileReader& reader_;
  const PipelineOptions& options_;
  std::optional<PoolFor> pool_;  // before what it leases: it outlives it
  std::unique_ptr<StagingRing> ring_;
  std::map<int, std::unique_ptr<DeviceLane>> lanes_;
  FreeList<Buffers> buffers_;
  std::vector<Item> items_;  // in file order

  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> device_unshuffled_{0};
  std::atomic<uint64_t> host_unshuffled_{0};
  std::string host_unshuffle_reason_;  // the first one; guarded by mu_
  std::atomic<bool> failed_{false};
  bool unsettled_ = false;  // set by TearDownDevices
  std::mutex mu_;
  std::condition_variable cv_;
  Status error_;
  size_t jobs_total_ = 0;
  size_t jobs_done_ = 0;
  uint64_t bytes_done_ = 0;
  uint64_t bytes_woken_ = 0;  // bytes_done_ when the caller was last woken
};

void LoadRun::NoteHostUnshuffle(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (host_unshuffle_reason_.empty()) host_unshuffle_reason_ = why;
}

void LoadRun::Fail(Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(s);
  failed_ = true;
}

Status LoadRun::VerifyRaw(const TensorMeta& t, size_t ci,
                          std::span<const std::byte> raw) const {
  if (!options_.verify_checksums) return Status::Ok();
  return reader_.CheckChecksum(t, ci, Checksum(raw));
}

Status LoadRun::ReadStoredBytes(const TensorMeta& t, size_t ci,
                                std::span<std::byte> dst,
                                const std::byte* stored) {
  if (stored == nullptr) bytes_read_ += dst.size();
  if (options_.verify_checksums) {
    return reader_.ReadVerified(t, ci, dst, stored);
  }
  if (stored != nullptr) {
    std::memcpy(dst.data(), stored, dst.size());
    return Status::Ok();
  }
  return reader_.file().ReadAt(t.chunks[ci].offset, dst);
}

// Fills `dst` with the raw bytes of chunk `ci` (kept byte-shuffled when
// `keep_shuffled`). `stored` points at the chunk's stored bytes when they
// are already in memory (the mapped file, a job's shared read), else it is
// null and they are read here. `in_place`: `dst` already is the stored
// bytes (a tensor aliasing the mapped file), so only the checksum is left.
Status LoadRun::Decode(const TensorMeta& t, size_t ci, std::span<std::byte> dst,
                       const std::byte* stored, bool keep_shuffled,
                       bool in_place, Buffers& b) {
  const ChunkMeta& c = t.chunks[ci];
  if (c.codec == Codec::kNone && (c.shuffle_elem == 0 || keep_shuffled)) {
    // Stored bytes are the wanted bytes.
    if (c.stored_size != dst.size()) {
      return Status::Corruption(
          reader_.ChunkWhere(t, ci) + ": stored size " + std::to_string(c.stored_size) +
          " of an uncompressed chunk, expected raw size " +
          std::to_string(dst.size()));
    }
    if (in_place) return VerifyRaw(t, ci, dst);  // nothing to move
    return ReadStoredBytes(t, ci, dst, stored);
  }
  std::span<const std::byte> in;
  bool verified = false;
  if (stored != nullptr) {
    in = {stored, c.stored_size};
  } else {
    std::span<std::byte> buf = b.stored.Get(c.stored_size);
    RCKPT_RETURN_IF_ERROR(ReadStoredBytes(t, ci, buf, nullptr));
    verified = options_.verify_checksums;
    in = buf;
  }
  return reader_.DecodeChunk(t, ci, in, dst, b.scratch,
                             options_.verify_checksums && !verified,
                             keep_shuffled);
}

Status LoadRun::CopyFromSlot(DeviceLane& lane, std::byte* dst,
                             StagingRing::Slot slot, uint32_t shuffle_elem) {
  DeviceRuntime& rt = *options_.runtime;
  std::lock_guard<std::mutex> lock(lane.mu);
  Status s;
  bool enqueued = false;
  if (shuffle_elem >= 2) {  // lane.device_unshuffle: SetUpDevices made the scratch
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
    // The slot may still be read by an enqueued copy: it is free again once
    // the stream is waited for, and never when that fails too.
    Status waited = enqueued ? rt.Synchronize(lane.device, lane.stream) : Status::Ok();
    if (waited.ok()) {
      ring_->Release(slot);
      return event.status();
    }
    lane.unsettled = true;
    ring_->Abandon(slot, waited);
    return waited;  // names both causes
  }
  ring_->Retire(slot, *event);
  return Status::Ok();
}

Status LoadRun::DeviceChunk(const TensorDest& dest, size_t ci,
                            Buffers& b) {
  const TensorMeta& t = *dest.tensor;
  const ChunkMeta& c = t.chunks[ci];
  DeviceLane& lane = *lanes_.at(dest.device.index);
  std::byte* dst = static_cast<std::byte*>(dest.data) + c.tensor_offset;
  if (Mapped(c) != nullptr) bytes_read_ += c.stored_size;
  const bool fits_slot = c.raw_size <= ring_->slot_bytes();
  // The device un-shuffles a chunk that fits a slot; the host every other.
  const bool shuffled = c.shuffle_elem >= 2 && lane.device_unshuffle && fits_slot;
  if (c.shuffle_elem >= 2) (shuffled ? device_unshuffled_ : host_unshuffled_) += c.raw_size;
  if (c.shuffle_elem >= 2 && !shuffled) {
    NoteHostUnshuffle(!lane.device_unshuffle
                          ? lane.why_host
                          : "a chunk of " + std::to_string(c.raw_size) +
                                " bytes is larger than a staging slot (" +
                                std::to_string(ring_->slot_bytes()) +
                                " bytes): staging_bytes of at least twice the largest chunk "
                                "keep every chunk on the device");
  }
  if (fits_slot) {
    // Bytes that cross a network are fetched before a slot is taken: each
    // worker keeps a request in flight (ReadConcurrency of them), and the
    // ring's slots bound only the decodes and copies, not the requests.
    const std::byte* stored = Mapped(c);
    if (stored == nullptr && reader_.file().ReadConcurrency() > 0) {
      std::span<std::byte> fetched = b.stored.Get(c.stored_size);
      RCKPT_RETURN_IF_ERROR(reader_.file().ReadAt(c.offset, fetched));
      bytes_read_ += c.stored_size;
      stored = fetched.data();
    }
    RCKPT_ASSIGN_OR_RETURN(StagingRing::Slot slot, ring_->Acquire(c.raw_size));
    Status s = Decode(t, ci, {slot.data, c.raw_size}, stored, shuffled,
                      /*in_place=*/false, b);
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
    return Status::OutOfMemory(reader_.ChunkWhere(t, ci) + ": " +
                               std::to_string(c.raw_size) +
                               " bytes of host memory to decode it");
  }
  RCKPT_RETURN_IF_ERROR(Decode(t, ci, {whole.get(), c.raw_size}, Mapped(c),
                               /*keep_shuffled=*/false, /*in_place=*/false, b));
  for (uint64_t off = 0; off < c.raw_size; off += ring_->slot_bytes()) {
    if (failed_) return Status::Ok();  // someone else's error wins
    const uint64_t n = std::min(ring_->slot_bytes(), c.raw_size - off);
    RCKPT_ASSIGN_OR_RETURN(StagingRing::Slot slot, ring_->Acquire(n));
    std::memcpy(slot.data, whole.get() + off, n);
    RCKPT_RETURN_IF_ERROR(CopyFromSlot(lane, dst + off, slot, 0));
  }
  return Status::Ok();
}

Status LoadRun::DoJob(const Job& job, Buffers& b) {
  if (job.end - job.begin == 1) {
    const Item& it = items_[job.begin];
    const TensorDest& d = *it.dest;
    const ChunkMeta& c = ChunkOf(it);
    if (!d.device.is_cpu()) return DeviceChunk(d, it.chunk, b);
    std::byte* dst = static_cast<std::byte*>(d.data) + c.tensor_offset;
    if (Mapped(c) != nullptr) bytes_read_ += c.stored_size;
    return Decode(*d.tensor, it.chunk, {dst, c.raw_size}, Mapped(c),
                  /*keep_shuffled=*/false, d.in_place, b);
  }
  // Several small host chunks: one read for all of them, unless mapped.
  const uint64_t first = ChunkOf(items_[job.begin]).offset;
  const ChunkMeta& last_chunk = ChunkOf(items_[job.end - 1]);
  const uint64_t span = last_chunk.offset + last_chunk.stored_size - first;
  const std::byte* base = options_.mapped_file != nullptr
                              ? options_.mapped_file + first
                              : nullptr;
  if (base == nullptr) {
    std::span<std::byte> buf = b.stored.Get(span);
    RCKPT_RETURN_IF_ERROR(reader_.file().ReadAt(first, buf));
    base = buf.data();
  }
  bytes_read_ += span;
  // Decode leaves b.stored (which may hold the shared read) alone when it is
  // given the stored bytes.
  for (size_t k = job.begin; k < job.end && !failed_; ++k) {
    const Item& it = items_[k];
    const TensorDest& d = *it.dest;
    const ChunkMeta& c = ChunkOf(it);
    std::byte* dst = static_cast<std::byte*>(d.data) + c.tensor_offset;
    RCKPT_RETURN_IF_ERROR(Decode(*d.tensor, it.chunk, {dst, c.raw_size},
                                 base + (c.offset - first),
                                 /*keep_shuffled=*/false, d.in_place, b));
  }
  return Status::Ok();
}

void LoadRun::RunJob(const Job& job) {
  Status s;
  if (!failed_) {
    std::unique_ptr<Buffers> b = buffers_.Take();
    try {
      s = DoJob(job, *b);
      // Bytes that fail their checksum are fetched once more before the
      // chunk is refused: what crossed a network may have been damaged on
      // the way, and the same bytes again are the file's own.
      if (s.code() == StatusCode::kCorruption && options_.mapped_file == nullptr && !failed_) {
        s = DoJob(job, *b);
      }
    } catch (const std::bad_alloc&) {
      const Item& it = items_[job.begin];
      s = Status::OutOfMemory(reader_.ChunkWhere(*it.dest->tensor, it.chunk) +
                              ": out of host memory");
    }
    buffers_.Give(std::move(b));
  }
  if (!s.ok()) Fail(s);
  uint64_t raw = 0;
  for (size_t k = job.begin; k < job.end; ++k) raw += ChunkOf(items_[k]).raw_size;
  std::lock_guard<std::mutex> lock(mu_);
  ++jobs_done_;
  bytes_done_ += raw;
  if (jobs_done_ == jobs_total_ || !s.ok() ||
      (options_.progress && bytes_done_ - bytes_woken_ >= kProgressStep)) {
    bytes_woken_ = bytes_done_;
    cv_.notify_all();
  }
}

std::vector<Job> LoadRun::MakeJobs() const {
  std::vector<Job> jobs;
  auto batchable = [&](const Item& it) {
    return it.dest->device.is_cpu() &&
           ChunkOf(it).stored_size <= kBatchChunkBytes;
  };
  size_t k = 0;
  while (k < items_.size()) {
    Job job{k, k + 1};
    if (batchable(items_[k])) {
      const uint64_t first = ChunkOf(items_[k]).offset;
      uint64_t end = first + ChunkOf(items_[k]).stored_size;
      while (job.end < items_.size() && batchable(items_[job.end])) {
        const ChunkMeta& c = ChunkOf(items_[job.end]);
        if (c.offset < end || c.offset - end > kBatchGapBytes ||
            c.offset + c.stored_size - first > kBatchSpanBytes) {
          break;
        }
        end = c.offset + c.stored_size;
        ++job.end;
      }
    }
    jobs.push_back(job);
    k = job.end;
  }
  return jobs;
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
    std::unique_ptr<DeviceLane>& lane = lanes_[d.device.index];
    if (lane == nullptr) {
      lane = std::make_unique<DeviceLane>();
      lane->device = d.device;
    }
    for (const ChunkMeta& c : d.tensor->chunks) {
      max_chunk = std::max(max_chunk, c.raw_size);
      lane->has_shuffled = lane->has_shuffled || c.shuffle_elem >= 2;
    }
  }
  if (lanes_.empty()) return Status::Ok();
  pool_.emplace(*options_.runtime);
  DevicePool& pool = **pool_;
  for (auto& [index, lane] : lanes_) {
    RCKPT_ASSIGN_OR_RETURN(lane->stream_lease, pool.LeaseStream(lane->device));
    lane->stream = lane->stream_lease.stream();
    lane->has_stream = true;
    if (options_.caller != nullptr) {
      RCKPT_RETURN_IF_ERROR(options_.caller->WaitForCaller(lane->device, lane->stream));
    }
    std::string why_not;
    lane->device_unshuffle = options_.device_unshuffle &&
                             options_.runtime->CanUnshuffle(lane->device, &why_not);
    if (!options_.device_unshuffle) {
      lane->why_host = "device_unshuffle is off";
    } else if (!lane->device_unshuffle) {
      lane->why_host = lane->device.ToString() + " cannot un-shuffle: " + why_not;
    }
  }
  RCKPT_ASSIGN_OR_RETURN(
      ring_, StagingRing::Create(pool, *options_.runtime, lanes_.begin()->second->device,
                                 options_.staging_bytes, std::max<uint64_t>(max_chunk, 1)));
  // The device un-shuffle lands each chunk in a scratch slot first. A device
  // too full for it (a training process whose caching allocator holds the
  // rest) un-shuffles on the host instead: slower, never a failed load.
  for (auto& [index, lane] : lanes_) {
    if (!lane->device_unshuffle || !lane->has_shuffled) continue;
    Status scratch;
    if (options_.device_allocator != nullptr) {
      const DeviceAllocator::Request r{kScratchName, lane->device, DType::kU8,
                                       {static_cast<int64_t>(ring_->slot_bytes())}};
      Result<std::vector<Tensor>> made = AllocateDeviceTensors(*options_.device_allocator, {&r, 1});
      if (made.ok()) {
        lane->scratch_tensor = std::move(made->front());
        lane->scratch = lane->scratch_tensor.data();
      }
      scratch = made.status();
    } else {
      Result<DevicePool::Lease> lease = pool.LeaseScratch(lane->device, ring_->slot_bytes());
      if (lease.ok()) {
        lane->scratch_lease = std::move(*lease);
        lane->scratch = lane->scratch_lease.data();
      }
      scratch = lease.status();
    }
    if (scratch.code() == StatusCode::kOutOfMemory) {
      lane->device_unshuffle = false;
      lane->why_host = "no room on " + lane->device.ToString() + " for the un-shuffle scratch (" +
                       std::to_string(ring_->slot_bytes()) + " bytes)";
    } else if (!scratch.ok()) {
      return scratch.WithContext("device un-shuffle scratch");
    }
  }
  return Status::Ok();
}

Status LoadRun::TearDownDevices() {
  Status first;
  if (ring_ != nullptr) first = ring_->Drain();
  for (auto& [index, lane] : lanes_) {
    if (!lane->has_stream) continue;
    Status s = options_.runtime->Synchronize(lane->device, lane->stream);
    if (!s.ok()) lane->unsettled = true;
    if (first.ok()) first = s;
  }
  // The stream and scratch, idle now, go back to the pool (the allocator's
  // scratch to its owner); those of a stream that could not be waited for
  // are retired, and so are the destinations (unsettled_, for the caller).
  for (auto& [index, lane] : lanes_) {
    if (!lane->unsettled) continue;
    unsettled_ = true;
    DevicePool& pool = **pool_;
    pool.Retire(std::move(lane->stream_lease));
    pool.Retire(std::move(lane->scratch_lease));
    if (lane->scratch_tensor.defined() && lane->scratch_tensor.nbytes() > 0) {
      const uint64_t n = lane->scratch_tensor.nbytes();
      pool.Retire(lane->device, std::make_shared<Tensor>(std::move(lane->scratch_tensor)), n,
                  /*forever=*/true);
    }
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

  uint64_t total = 0;
  for (const TensorDest& d : dests) {
    for (size_t ci = 0; ci < d.tensor->chunks.size(); ++ci) {
      items_.push_back(Item{&d, ci});
      total += d.tensor->chunks[ci].raw_size;
    }
  }
  // File order keeps the reads sequential on disk and lets neighbours share
  // a read.
  std::sort(items_.begin(), items_.end(), [this](const Item& a, const Item& b) {
    return ChunkOf(a).offset < ChunkOf(b).offset;
  });
  const std::vector<Job> jobs = MakeJobs();
  jobs_total_ = jobs.size();

  {
    // A file in object storage keeps its requests in flight whatever the
    // number of cores: each worker waits on one.
    ThreadPool pool(std::max(ResolveThreads(options_.threads), reader_.file().ReadConcurrency()));
    for (const Job& job : jobs) {
      pool.Submit([this, job] { RunJob(job); });
    }
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t reported = UINT64_MAX;
    // Reports progress when it moved; the last report (after every job, when
    // nothing failed) is always made, even when the workers finished before
    // this thread first looked.
    auto report = [&] {
      if (!options_.progress || bytes_done_ == reported || !error_.ok()) return;
      reported = bytes_done_;
      lock.unlock();
      const bool go_on = options_.progress(reported, total);
      lock.lock();
      if (!go_on && error_.ok()) {
        error_ = Status::IoError("cancelled");
        failed_ = true;
      }
    };
    while (jobs_done_ < jobs.size()) {
      cv_.wait(lock);
      report();
    }
    report();
  }  // the pool joins here

  Status teardown = TearDownDevices();
  if (stats != nullptr) {
    stats->bytes_read = bytes_read_;
    stats->bytes_restored = error_.ok() && teardown.ok() ? total : bytes_done_;
    stats->staging_high_water = ring_ ? ring_->high_water() : 0;
    stats->staging_capacity = ring_ ? ring_->capacity() : 0;
    stats->device_unshuffled_bytes = device_unshuffled_;
    stats->host_unshuffled_bytes = host_unshuffled_;
    stats->host_unshuffle_reason = host_unshuffle_reason_;
    stats->unsettled = unsettled_;
  }
  ring_.reset();
  if (!error_.ok()) return error_;
  return teardown;
}

}  // namespace

Status RunLoadPipeline(const FileReader& reader,
                       const std::vector<TensorDest>& dests,
                       const PipelineOptions& options, PipelineStats* stats) {
  DevicePool* pool = options.runtime != nullptr ? options.runtime->pool() : nullptr;
  const uint64_t resets = pool != nullptr ? pool->device_resets() : 0;
  Status s = LoadRun(reader, options).Run(dests, stats);
  if (s.ok() || pool == nullptr || pool->device_resets() == resets) return s;
  // A device was reset (cudaDeviceReset) since the pool last served it: the
  // runtime dropped the stale streams, buffers and kernels, and a second run
  // makes them anew.
  return LoadRun(reader, options).Run(dests, stats);
}

std::shared_ptr<std::byte> MapForLoad(const FileReader& reader, const LoadOptions& o) {
  if (!o.map_file) return nullptr;
  Result<std::shared_ptr<std::byte>> m = reader.file().MapPrivate();
  return m.ok() ? *m : nullptr;
}

PipelineOptions PipelineOptionsOf(const LoadOptions& o, DeviceRuntime& rt,
                                  const std::byte* mapped_file, CallerStreams* caller) {
  PipelineOptions p;
  p.mapped_file = mapped_file;
  p.caller = caller;
  p.device_unshuffle = o.device_unshuffle;
  p.runtime = &rt;
  p.verify_checksums = o.verify_checksums;
  p.threads = o.threads;
  p.staging_bytes = o.staging_bytes;
  p.progress = o.progress;
  p.device_allocator = o.device_allocator;
  return p;
}

Status UploadToDevice(DeviceRuntime& runtime, CallerStreams* caller, Device device, void* dst,
                      const std::byte* src, uint64_t n, std::shared_ptr<void> keep,
                      bool forever) {
  PoolFor pool(runtime);
  RCKPT_ASSIGN_OR_RETURN(DevicePool::Lease lease, pool->LeaseStream(device));
  const Stream stream = lease.stream();
  Status s = caller != nullptr ? caller->WaitForCaller(device, stream) : Status::Ok();
  if (s.ok()) s = runtime.CopyToDeviceAsync(device, stream, dst, src, n);
  // Waits for the copy even after a failure: the stream goes back idle.
  Status done = runtime.Synchronize(device, stream);
  if (!done.ok()) {
    // The copy may still use both ends: they and the stream are retired.
    pool->Retire(device, std::move(keep), n, forever);
    pool->Retire(std::move(lease));
  }
  return s.ok() ? done : s;
}

}  // namespace rckpt
