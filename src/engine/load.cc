// Load, LoadInto, ReadTensors and PlanLoad (io.h): options first, then the
// file, then the plan, then every destination is allocated, then the
// pipeline fills them. Only a complete result is handed back.
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "engine/block_read.h"
#include "engine/caller_streams.h"
#include "engine/device_alloc.h"
#include "engine/pipeline.h"
#include "engine/placement.h"
#include "format/chunk_codec.h"
#include "format/collective_layout.h"
#include "format/file_reader.h"
#include "format/skeleton.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime/device_pool.h"
#include "util/host_memory.h"

namespace rckpt {
namespace {

DeviceRuntime& RuntimeOf(const LoadOptions& o) {
  return o.runtime != nullptr ? *o.runtime : DefaultRuntime();
}

FileSystem& FileSystemOf(const LoadOptions& o) {
  return o.fs != nullptr ? *o.fs : DefaultFileSystem();
}

// Header and footer, read by every open besides the manifest.
constexpr uint64_t kFrameBytes = 128;

// New memory for a tensor on `target`, owned by the returned Tensor
// (AllocateOnRuntime): device memory is freed through `runtime`, which
// therefore must outlive the tensor (and every copy of it).
Result<Tensor> AllocateTensor(DeviceRuntime& runtime, const TensorMeta& t, Device target) {
  Result<Tensor> tensor = AllocateOnRuntime(runtime, t.dtype, t.shape, target);
  if (!tensor.ok()) return tensor.status().WithContext("tensor '" + t.name + "'");
  return tensor;
}

// The host tensors of one load, carved from one block of memory when they
// are large together: one huge-page mapping faults once per 2 MiB, where
// hundreds of separate allocations would fault once per 4 KiB
// (docs/PERFORMANCE.md). The block lives until its last tensor is gone.
class HostArena {
 public:
  // Space for the host tensors of `plan` not marked in `mapped`.
  static Result<HostArena> Create(const Manifest& m, const LoadPlan& plan,
                                  const std::vector<bool>& mapped) {
    HostArena a;
    uint64_t total = 0;
    for (size_t k = 0; k < plan.tensor_index.size(); ++k) {
      if (!plan.placements[k].target.is_cpu() || mapped[k]) continue;
      total += AlignUp64(m.tensors[plan.tensor_index[k]].nbytes);
    }
    if (total < kHugeBlockBytes) return a;
    a.block_ = AllocateHostBlock(total, /*zero=*/false);
    if (a.block_ == nullptr) {
      return Status::OutOfMemory("host memory for the loaded tensors (" +
                                 std::to_string(total) + " bytes)");
    }
    return a;
  }

  bool active() const { return block_ != nullptr; }

  Tensor Take(const TensorMeta& t) {
    void* p = static_cast<std::byte*>(block_.get()) + used_;
    used_ += AlignUp64(t.nbytes);
    return Tensor::Adopt(t.dtype, t.shape, Device::Cpu(), std::shared_ptr<void>(block_, p), p);
  }

 private:
  static uint64_t AlignUp64(uint64_t n) { return (n + 63) & ~uint64_t{63}; }
  std::shared_ptr<void> block_;
  uint64_t used_ = 0;
};

// Whether a host tensor can alias the mapped file: every chunk stored raw,
// unshuffled and contiguous, starting 64-byte aligned.
bool CanAliasFile(const TensorMeta& t) {
  if (t.nbytes == 0 || t.sharded() || t.chunks.empty() || t.chunks[0].offset % 64 != 0) {
    return false;
  }
  return StoredRawInOrder(t.chunks);
}

// A sharded tensor (format 1.1) to be assembled at `data` on `device`.
struct ShardedDest {
  const TensorMeta* tensor = nullptr;
  Device device;
  void* data = nullptr;
  Tensor owner;  // of `data`
};

// Sharded tensors are assembled from their shards in host memory, then
// copied to their device: the chunks of a shard hold a block, not a range,
// of the tensor, so they cannot stream into device memory as they are.
Status AssembleSharded(const FileReader& reader, const std::vector<ShardedDest>& dests,
                       const PipelineOptions& po, PipelineStats* stats) {
  if (dests.empty()) return Status::Ok();
  std::vector<BlockRead> reads;
  std::vector<std::unique_ptr<std::byte[]>> staged(dests.size());
  for (size_t i = 0; i < dests.size(); ++i) {
    const TensorMeta& t = *dests[i].tensor;
    std::byte* dst = static_cast<std::byte*>(dests[i].data);
    if (!dests[i].device.is_cpu()) {
      staged[i].reset(new std::byte[t.nbytes]);
      dst = staged[i].get();
    }
    reads.push_back(BlockRead{&t, WholeBlock(t.shape), dst});
  }
  PipelineStats ps;
  RCKPT_RETURN_IF_ERROR(ReadBlocks(reader, reads, po, &ps));
  stats->bytes_read += ps.bytes_read;
  stats->bytes_restored += ps.bytes_restored;
  for (size_t i = 0; i < dests.size(); ++i) {
    if (staged[i] == nullptr) continue;
    auto ends = std::make_shared<std::pair<std::unique_ptr<std::byte[]>, Tensor>>(
        std::move(staged[i]), dests[i].owner);
    RCKPT_RETURN_IF_ERROR(UploadToDevice(*po.runtime, po.caller, dests[i].device, dests[i].data,
                                         ends->first.get(), dests[i].tensor->nbytes, ends,
                                         /*forever=*/po.device_allocator != nullptr)
                              .WithContext("tensor '" + dests[i].tensor->name + "'"));
  }
  return Status::Ok();
}

void FillStats(const LoadOptions& o, const FileReader& reader,
               const PipelineStats& ps,
               std::chrono::steady_clock::time_point start, uint64_t extra,
               DeviceRuntime& runtime) {
  if (o.stats == nullptr) return;
  o.stats->device_pool = runtime.PoolStats();
  o.stats->bytes_read =
      ps.bytes_read + reader.manifest().manifest_size + kFrameBytes;
  o.stats->bytes_restored = ps.bytes_restored + extra;
  o.stats->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  o.stats->staging_high_water = ps.staging_high_water;
  o.stats->staging_capacity = ps.staging_capacity;
  o.stats->device_unshuffled_bytes = ps.device_unshuffled_bytes;
  o.stats->host_unshuffled_bytes = ps.host_unshuffled_bytes;
  o.stats->host_unshuffle_reason = ps.host_unshuffle_reason;
}

// The device tensors of a plan from the options' allocator, all at once on
// the calling thread: k -> tensor for every planned tensor bound for a
// device.
Result<std::map<size_t, Tensor>> AllocateWithAllocator(const Manifest& m, const LoadPlan& plan,
                                                       DeviceAllocator& allocator) {
  std::vector<DeviceAllocator::Request> requests;
  std::vector<size_t> ks;
  for (size_t k = 0; k < plan.tensor_index.size(); ++k) {
    const Device target = plan.placements[k].target;
    if (target.is_cpu()) continue;
    const TensorMeta& t = m.tensors[plan.tensor_index[k]];
    requests.push_back(DeviceAllocator::Request{t.name, target, t.dtype, t.shape});
    ks.push_back(k);
  }
  std::map<size_t, Tensor> out;
  if (requests.empty()) return out;
  RCKPT_ASSIGN_OR_RETURN(std::vector<Tensor> made, AllocateDeviceTensors(allocator, requests));
  for (size_t i = 0; i < made.size(); ++i) {
    out.emplace(ks[i], std::move(made[i]));
  }
  return out;
}

// Allocates every planned tensor and runs the pipeline into them. On
// failure the tensors (and so their memory) are released before returning.
Result<std::vector<Tensor>> Restore(const FileReader& reader,
                                    const LoadPlan& plan,
                                    const LoadOptions& options,
                                    DeviceRuntime& runtime,
                                    PipelineStats* stats) {
  CallerStreams caller(runtime, options.caller_stream);
  const Manifest& m = reader.manifest();
  const size_t n = plan.tensor_index.size();
  std::vector<Tensor> tensors;
  std::vector<TensorDest> dests;
  tensors.reserve(n);
  dests.reserve(n);
  const std::shared_ptr<std::byte> mapping = MapForLoad(reader, options);
  std::vector<bool> aliased(n, false);
  for (size_t k = 0; k < n && mapping != nullptr; ++k) {
    aliased[k] = plan.placements[k].target.is_cpu() &&
                 CanAliasFile(m.tensors[plan.tensor_index[k]]);
  }
  RCKPT_ASSIGN_OR_RETURN(HostArena arena, HostArena::Create(m, plan, aliased));
  std::map<size_t, Tensor> allocated;
  if (options.device_allocator != nullptr) {
    RCKPT_ASSIGN_OR_RETURN(allocated, AllocateWithAllocator(m, plan, *options.device_allocator));
  }
  std::vector<ShardedDest> sharded;
  for (size_t k = 0; k < n; ++k) {
    const TensorMeta& t = m.tensors[plan.tensor_index[k]];
    const Device target = plan.placements[k].target;
    if (aliased[k]) {
      std::byte* p = mapping.get() + t.chunks[0].offset;
      Tensor tensor = Tensor::Adopt(t.dtype, t.shape, Device::Cpu(),
                                    std::shared_ptr<void>(mapping, p), p);
      dests.push_back(TensorDest{&t, target, p, /*in_place=*/true});
      tensors.push_back(std::move(tensor));
      continue;
    }
    Tensor tensor;
    if (auto it = allocated.find(k); it != allocated.end()) {
      tensor = std::move(it->second);
    } else {
      RCKPT_ASSIGN_OR_RETURN(tensor, target.is_cpu() && arena.active()
                                         ? arena.Take(t)
                                         : AllocateTensor(runtime, t, target));
    }
    if (t.sharded()) {
      sharded.push_back(ShardedDest{&t, target, tensor.data(), tensor});
    } else {
      dests.push_back(TensorDest{&t, target, tensor.data()});
    }
    tensors.push_back(std::move(tensor));
  }
  const PipelineOptions po = PipelineOptionsOf(options, runtime, mapping.get(), &caller);
  Status s = RunLoadPipeline(reader, dests, po, stats);
  if (!s.ok() && stats != nullptr && stats->unsettled) {
    // Copies into the tensors could not be waited for: their memory is
    // retired, never freed or handed back to an allocator while a copy may
    // still write it (an allocator's own tensors for good: their owner may
    // be gone when the pool is released).
    PoolFor pool(runtime);
    for (size_t k = 0; k < n; ++k) {
      const Tensor& t = tensors[k];
      if (t.device().is_cpu() || t.nbytes() == 0) continue;
      pool->Retire(t.device(), std::make_shared<Tensor>(t), t.nbytes(),
                   /*forever=*/options.device_allocator != nullptr);
    }
  }
  RCKPT_RETURN_IF_ERROR(s);
  RCKPT_RETURN_IF_ERROR(AssembleSharded(reader, sharded, po, stats));
  return tensors;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += "'" + n + "'";
  }
  return out;
}

// The steps every load takes before planning: the options are checked
// before the file is opened (so a missing file still gives their error).
// The tree's entries of sections a load did not choose (LoadOptions::sections
// and skip_sections) go with their tensors: the tree's top-level map, or a
// collective file's "common" map, keeps only the chosen sections' entries.
void KeepChosenSections(const LoadOptions& o, Checkpoint& ck) {
  if (o.sections.empty() && o.skip_sections.empty()) return;
  Value* sections = SectionsOfTree(ck.Metadata(), ck.Tree());
  if (sections == nullptr) return;
  const std::set<std::string_view> want(o.sections.begin(), o.sections.end());
  const std::set<std::string_view> skip(o.skip_sections.begin(), o.skip_sections.end());
  std::erase_if(sections->entries(), [&](const Value::Entry& e) {
    if (e.first.kind() != ValueKind::kString) return false;
    const std::string& name = e.first.as_string();
    return (!want.empty() && want.count(name) == 0) || skip.count(name) != 0;
  });
}

struct OpenedFile {
  std::chrono::steady_clock::time_point start;
  DeviceRuntime* runtime;
  DeviceInventory devices;
  std::unique_ptr<FileReader> reader;
};

Result<OpenedFile> OpenForLoad(const std::string& path,
                               const LoadOptions& options,
                               int device_count = -1) {
  DeviceRuntime* runtime = &RuntimeOf(options);
  OpenedFile f{std::chrono::steady_clock::now(), runtime,
               device_count >= 0 ? DeviceInventory::Assumed(device_count)
                                 : DeviceInventory(*runtime, options.auto_device),
               nullptr};
  RCKPT_RETURN_IF_ERROR(CheckLoadOptions(options, f.devices));
  RCKPT_ASSIGN_OR_RETURN(f.reader,
                         FileReader::Open(FileSystemOf(options), path));
  return f;
}

}  // namespace

Result<Checkpoint> Load(const std::string& path, const LoadOptions& options) {
  RCKPT_ASSIGN_OR_RETURN(OpenedFile f, OpenForLoad(path, options));
  const Manifest& m = f.reader->manifest();
  RCKPT_ASSIGN_OR_RETURN(
      LoadPlan plan,
      PlanPlacements(m.sections, m.tensors, m.rng, options, f.devices));
  // Sections, RNG records (validated here, before any tensor byte is read),
  // tree and metadata.
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, CheckpointSkeleton(m));
  KeepChosenSections(options, ck);
  PipelineStats ps;
  RCKPT_ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                         Restore(*f.reader, plan, options, *f.runtime, &ps));
  ck.mutable_tensors().reserve(ck.tensors().size() + tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorMeta& t = m.tensors[plan.tensor_index[k]];
    RCKPT_RETURN_IF_ERROR(
        ck.AddTensor(t.section, t.name, std::move(tensors[k]), t.role));
    ck.mutable_tensors().back().origin = t.origin;
  }
  uint64_t rng_bytes = 0;
  for (const RngRecord& r : m.rng) rng_bytes += r.bytes.size();
  FillStats(options, *f.reader, ps, f.start, rng_bytes, *f.runtime);
  return ck;
}

Status LoadInto(const std::string& path, const std::vector<LoadTarget>& targets,
                const LoadOptions& options, bool strict) {
  RCKPT_ASSIGN_OR_RETURN(OpenedFile f, OpenForLoad(path, options));
  const Manifest& m = f.reader->manifest();
  // Section selection decides which of the file's tensors are expected.
  RCKPT_ASSIGN_OR_RETURN(std::vector<size_t> selected,
                         SelectTensors(m.sections, m.tensors, options));
  std::map<std::string_view, size_t> in_file;
  for (size_t i : selected) in_file[m.tensors[i].name] = i;

  std::vector<std::string> missing, unexpected, mismatched, duplicate;
  std::set<std::string_view> seen;
  std::vector<TensorDest> dests;
  std::vector<ShardedDest> sharded;
  for (const LoadTarget& target : targets) {
    if (!seen.insert(target.name).second) {
      duplicate.push_back(target.name);
      continue;
    }
    auto it = in_file.find(target.name);
    if (it == in_file.end()) {
      missing.push_back(target.name);
      continue;
    }
    const TensorMeta& t = m.tensors[it->second];
    std::string problems;
    if (target.dtype != t.dtype) {
      problems += " dtype " + std::string(DTypeName(t.dtype)) +
                  " in the file, " + std::string(DTypeName(target.dtype)) +
                  " in the target;";
    }
    if (target.shape != t.shape) {
      problems += " shape " + ShapeToString(t.shape) + " in the file, " +
                  ShapeToString(target.shape) + " in the target;";
    }
    if (target.data == nullptr && t.nbytes > 0) {
      problems += " the target has no buffer;";
    }
    if (!problems.empty()) {
      problems.pop_back();
      mismatched.push_back("'" + target.name + "':" + problems);
      continue;
    }
    if (t.sharded()) {
      sharded.push_back(ShardedDest{&t, target.device, target.data, Tensor()});
    } else {
      dests.push_back(TensorDest{&t, target.device, target.data});
    }
  }
  if (strict) {
    for (size_t i : selected) {
      if (seen.count(m.tensors[i].name) == 0) {
        unexpected.push_back(m.tensors[i].name);
      }
    }
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty() ||
      !duplicate.empty()) {
    std::string msg = "load_into '" + path + "':";
    if (!missing.empty()) {
      msg += " " + std::to_string(missing.size()) +
             " missing from the file: " + JoinNames(missing) + ";";
    }
    if (!unexpected.empty()) {
      msg += " " + std::to_string(unexpected.size()) +
             " unexpected (in the file, no target): " + JoinNames(unexpected) +
             ";";
    }
    if (!mismatched.empty()) {
      msg += " " + std::to_string(mismatched.size()) + " mismatched:";
      for (const std::string& s : mismatched) msg += " " + s + ";";
    }
    if (!duplicate.empty()) {
      msg += " targets named twice: " + JoinNames(duplicate) + ";";
    }
    msg.pop_back();
    return Status::InvalidArgument(msg);
  }
  auto check_device = [&](const TensorMeta& t, Device d) -> Status {
    RCKPT_ASSIGN_OR_RETURN(bool exists, f.devices.Exists(d));
    if (exists) return Status::Ok();
    return Status::DeviceUnavailable(
        "load_into target '" + t.name + "' is on " + d.ToString() +
        ", which does not exist: this machine has " + f.devices.Describe());
  };
  for (const TensorDest& d : dests) {
    RCKPT_RETURN_IF_ERROR(check_device(*d.tensor, d.device));
  }
  for (const ShardedDest& d : sharded) {
    RCKPT_RETURN_IF_ERROR(check_device(*d.tensor, d.device));
  }
  PipelineStats ps;
  const std::shared_ptr<std::byte> mapping = MapForLoad(*f.reader, options);
  // The targets may still be read by the caller's work: the copies wait
  // for it.
  CallerStreams caller(*f.runtime, options.caller_stream);
  const PipelineOptions po = PipelineOptionsOf(options, *f.runtime, mapping.get(), &caller);
  RCKPT_RETURN_IF_ERROR(RunLoadPipeline(*f.reader, dests, po, &ps));
  RCKPT_RETURN_IF_ERROR(AssembleSharded(*f.reader, sharded, po, &ps));
  FillStats(options, *f.reader, ps, f.start, 0, *f.runtime);
  return Status::Ok();
}

Result<std::vector<TensorEntry>> ReadTensors(
    const std::string& path, const std::vector<std::string>& names,
    const LoadOptions& options) {
  RCKPT_ASSIGN_OR_RETURN(OpenedFile f, OpenForLoad(path, options));
  const Manifest& m = f.reader->manifest();
  std::map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < m.tensors.size(); ++i) by_name[m.tensors[i].name] = i;
  std::vector<size_t> indices;
  std::vector<std::string> unknown;
  std::set<std::string_view> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      return Status::InvalidArgument("read_tensors: '" + name +
                                     "' is asked for twice");
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      unknown.push_back(name);
    } else {
      indices.push_back(it->second);
    }
  }
  if (!unknown.empty()) {
    return Status::NotFound("read_tensors '" + path + "': no tensor named " +
                            JoinNames(unknown));
  }
  RCKPT_ASSIGN_OR_RETURN(LoadPlan plan,
                         PlanPlacements(m.sections, m.tensors, m.rng, options,
                                        f.devices, &indices));
  PipelineStats ps;
  RCKPT_ASSIGN_OR_RETURN(std::vector<Tensor> tensors,
                         Restore(*f.reader, plan, options, *f.runtime, &ps));
  std::vector<TensorEntry> out;
  out.reserve(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorMeta& t = m.tensors[indices[k]];
    TensorEntry e;
    e.name = t.name;
    e.section = t.section;
    e.role = t.role;
    e.tensor = std::move(tensors[k]);
    e.origin = t.origin;
    out.push_back(std::move(e));
  }
  FillStats(options, *f.reader, ps, f.start, 0, *f.runtime);
  return out;
}

Result<std::vector<Placement>> PlanLoad(const std::string& path,
                                        const LoadOptions& options,
                                        int cuda_device_count) {
  RCKPT_ASSIGN_OR_RETURN(OpenedFile f,
                         OpenForLoad(path, options, cuda_device_count));
  const Manifest& m = f.reader->manifest();
  RCKPT_ASSIGN_OR_RETURN(
      LoadPlan plan,
      PlanPlacements(m.sections, m.tensors, m.rng, options, f.devices));
  return std::move(plan.placements);
}

}  // namespace rckpt
