// LoadDistributed (distributed.h): each rank reads the chunks that hold its
// wanted blocks, places them, and picks up its RNG records and trees.
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "distributed/collective.h"
#include "distributed/rank_names.h"
#include "engine/block_read.h"
#include "engine/caller_streams.h"
#include "engine/device_alloc.h"
#include "engine/pipeline.h"
#include "engine/placement.h"
#include "format/file_reader.h"
#include "rckpt/distributed.h"
#include "rckpt/file.h"
#include "rckpt/runtime.h"

namespace rckpt {
namespace {

// The trees and RNG records a collective save kept per rank.
void TakeRankState(const Manifest& m, int rank, int world_size, RankLoad* out) {
  if (const Value* common = m.tree.Find("common")) out->common_tree = *common;
  if (const Value* ranks = m.tree.Find("ranks"); ranks != nullptr && ranks->is_sequence()) {
    out->rank_trees = ranks->items();
  }
  auto it = m.metadata.find(std::string(kWorldSizeKey));
  out->saved_world_size =
      it != m.metadata.end() ? std::atoi(it->second.c_str()) : static_cast<int>(out->rank_trees.size());
  for (const RngRecord& r : m.rng) {
    auto parsed = ParseRankRngName(r.name);
    if (!parsed) continue;
    RngRecord own = r;
    own.name = parsed->second;
    out->saved_rng[parsed->first].push_back(std::move(own));
  }
  if (out->saved_world_size == world_size) out->rng = out->saved_rng[rank];
}

// InvalidArgument unless `into` fits block `b` of tensor `t` on a device that
// exists.
Status CheckInto(const TensorMeta& t, const Block& b, const TensorView& into,
                 DeviceInventory& devices) {
  const std::string what = "tensor '" + t.name + "': the block's destination";
  if (into.dtype != t.dtype) {
    return Status::InvalidArgument(what + " has dtype " + std::string(DTypeName(into.dtype)) +
                                   ", the tensor " + std::string(DTypeName(t.dtype)));
  }
  if (into.shape != b.sizes) {
    return Status::InvalidArgument(what + " has shape " + ShapeToString(into.shape) +
                                   ", the block " + ShapeToString(b.sizes));
  }
  if (into.data == nullptr && into.nbytes() != 0) {
    return Status::InvalidArgument(what + " has no memory");
  }
  RCKPT_ASSIGN_OR_RETURN(bool exists, devices.Exists(into.device));
  if (!exists) {
    return Status::DeviceUnavailable(what + " is on " + into.device.ToString() +
                                     ", which does not exist: this machine has " +
                                     devices.Describe());
  }
  return Status::Ok();
}

Result<RankLoad> LoadOnRank(int rank, int world_size, const std::string& path,
                            const std::vector<BlockRequest>& wants, const LoadOptions& o) {
  DeviceRuntime& runtime = o.runtime != nullptr ? *o.runtime : DefaultRuntime();
  DeviceInventory devices(runtime, o.auto_device);
  RCKPT_RETURN_IF_ERROR(CheckLoadOptions(o, devices));
  FileSystem& fs = o.fs != nullptr ? *o.fs : DefaultFileSystem();
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(fs, path));
  const Manifest& m = reader->manifest();
  std::map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < m.tensors.size(); ++i) by_name[m.tensors[i].name] = i;
  std::vector<size_t> indices;  // of each request's tensor
  std::vector<size_t> placed;   // of the requests without `into`: placed by the policy
  std::vector<Block> blocks;
  for (const BlockRequest& w : wants) {
    auto it = by_name.find(w.name);
    if (it == by_name.end()) {
      return Status::NotFound("load '" + path + "': no tensor named '" + w.name + "'");
    }
    const TensorMeta& t = m.tensors[it->second];
    Block b = w.offsets.empty() && w.sizes.empty() ? WholeBlock(t.shape) : Block{w.offsets, w.sizes};
    RCKPT_RETURN_IF_ERROR(CheckBlockInShape("tensor '" + t.name + "'", t.shape, b));
    if (w.into) {
      RCKPT_RETURN_IF_ERROR(CheckInto(t, b, *w.into, devices));
    } else {
      placed.push_back(it->second);
    }
    indices.push_back(it->second);
    blocks.push_back(std::move(b));
  }
  RCKPT_ASSIGN_OR_RETURN(LoadPlan plan,
                         PlanPlacements(m.sections, m.tensors, m.rng, o, devices, &placed));
  // Each request's target device, and where its bytes are read to: the
  // request's host memory, or a new host tensor (uploaded afterwards when
  // its target is a device).
  std::vector<Device> targets(wants.size());
  for (size_t k = 0, p = 0; k < wants.size(); ++k) {
    targets[k] = wants[k].into ? wants[k].into->device : plan.placements[p++].target;
  }
  // The device blocks without a destination, from the caller's allocator
  // when there is one, all at once, before anything is read.
  std::vector<std::optional<Tensor>> device_blocks(wants.size());
  if (o.device_allocator != nullptr) {
    std::vector<DeviceAllocator::Request> requests;
    std::vector<size_t> ks;
    for (size_t k = 0; k < wants.size(); ++k) {
      if (wants[k].into || targets[k].is_cpu()) continue;
      const TensorMeta& t = m.tensors[indices[k]];
      requests.push_back(DeviceAllocator::Request{t.name, targets[k], t.dtype, blocks[k].sizes});
      ks.push_back(k);
    }
    if (!requests.empty()) {
      RCKPT_ASSIGN_OR_RETURN(std::vector<Tensor> made,
                             AllocateDeviceTensors(*o.device_allocator, requests));
      for (size_t i = 0; i < ks.size(); ++i) device_blocks[ks[i]] = std::move(made[i]);
    }
  }
  RankLoad out;
  std::vector<BlockRead> reads;
  std::vector<Tensor> host(wants.size());
  for (size_t k = 0; k < wants.size(); ++k) {
    const TensorMeta& t = m.tensors[indices[k]];
    if (wants[k].into && targets[k].is_cpu()) {
      host[k] = Tensor::Borrow(*wants[k].into);
    } else {
      RCKPT_ASSIGN_OR_RETURN(host[k], Tensor::Empty(t.dtype, blocks[k].sizes));
    }
    out.bytes_needed += host[k].nbytes();
    reads.push_back(BlockRead{&t, blocks[k], static_cast<std::byte*>(host[k].data())});
  }
  CallerStreams caller(runtime, o.caller_stream);
  // The mapping lives until the blocks are read: they are copies.
  const std::shared_ptr<std::byte> mapping = MapForLoad(*reader, o);
  PipelineStats stats;
  RCKPT_RETURN_IF_ERROR(
      ReadBlocks(*reader, reads, PipelineOptionsOf(o, runtime, mapping.get()), &stats));
  out.bytes_read = stats.bytes_read;
  for (size_t k = 0; k < wants.size(); ++k) {
    const TensorMeta& t = m.tensors[indices[k]];
    const Device target = targets[k];
    TensorEntry e;
    e.name = t.name;
    e.section = t.section;
    e.role = t.role;
    e.origin = t.origin;
    if (target.is_cpu()) {
      e.tensor = std::move(host[k]);
    } else {
      if (wants[k].into) {
        e.tensor = Tensor::Borrow(*wants[k].into);
      } else if (device_blocks[k].has_value()) {
        e.tensor = std::move(*device_blocks[k]);
      } else {
        RCKPT_ASSIGN_OR_RETURN(e.tensor,
                               AllocateOnRuntime(runtime, t.dtype, blocks[k].sizes, target));
      }
      auto ends = std::make_shared<std::pair<Tensor, Tensor>>(host[k], e.tensor);
      RCKPT_RETURN_IF_ERROR(UploadToDevice(runtime, &caller, target, e.tensor.data(),
                                           static_cast<const std::byte*>(host[k].data()),
                                           host[k].nbytes(), ends,
                                           /*forever=*/wants[k].into.has_value() ||
                                               device_blocks[k].has_value())
                                .WithContext("tensor '" + t.name + "'"));
    }
    out.blocks.push_back(std::move(e));
  }
  TakeRankState(m, rank, world_size, &out);
  return out;
}

}  // namespace

Result<RankLoad> LoadDistributed(Communicator& comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options) {
  Result<RankLoad> r = LoadOnRank(comm.rank(), comm.size(), path, wants, options);
  RCKPT_RETURN_IF_ERROR(Agree(comm, r.status()));
  return r;
}

}  // namespace rckpt
