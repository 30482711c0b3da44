// LoadDistributed (distributed.h): each rank reads the chunks that hold its
// wanted blocks, places them, and picks up its RNG records and trees.
#include <mpi.h>

#include <map>

#include "distributed/collective.h"
#include "distributed/rank_names.h"
#include "engine/block_read.h"
#include "engine/placement.h"
#include "format/file_reader.h"
#include "rckpt/distributed.h"
#include "rckpt/file.h"
#include "rckpt/runtime.h"

namespace rckpt {
namespace {

// A block's memory on `target`: host memory, or device memory freed through
// `runtime` when the last copy of the tensor goes.
Result<Tensor> AllocateBlock(DeviceRuntime& runtime, DType dtype, const Shape& sizes,
                             Device target) {
  if (target.is_cpu()) return Tensor::Empty(dtype, sizes);
  RCKPT_ASSIGN_OR_RETURN(uint64_t n, ShapeBytes(sizes, dtype));
  RCKPT_ASSIGN_OR_RETURN(void* p, runtime.Allocate(target, n));
  DeviceRuntime* rt = &runtime;
  std::shared_ptr<void> owner(p, [rt, target](void* q) { rt->Free(target, q); });
  return Tensor::Adopt(dtype, sizes, target, std::move(owner), p);
}

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

Result<RankLoad> LoadOnRank(int rank, int world_size, const std::string& path,
                            const std::vector<BlockRequest>& wants, const LoadOptions& o) {
  DeviceRuntime& runtime = o.runtime != nullptr ? *o.runtime : DefaultRuntime();
  const int devices = runtime.DeviceCount();
  RCKPT_RETURN_IF_ERROR(CheckLoadOptions(o, devices));
  FileSystem& fs = o.fs != nullptr ? *o.fs : PosixFileSystem();
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(fs, path));
  const Manifest& m = reader->manifest();
  std::map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < m.tensors.size(); ++i) by_name[m.tensors[i].name] = i;
  std::vector<size_t> indices;
  std::vector<Block> blocks;
  for (const BlockRequest& w : wants) {
    auto it = by_name.find(w.name);
    if (it == by_name.end()) {
      return Status::NotFound("load '" + path + "': no tensor named '" + w.name + "'");
    }
    const TensorMeta& t = m.tensors[it->second];
    Block b = w.offsets.empty() && w.sizes.empty() ? WholeBlock(t.shape) : Block{w.offsets, w.sizes};
    RCKPT_RETURN_IF_ERROR(CheckBlockInShape("tensor '" + t.name + "'", t.shape, b));
    indices.push_back(it->second);
    blocks.push_back(std::move(b));
  }
  RCKPT_ASSIGN_OR_RETURN(LoadPlan plan,
                         PlanPlacements(m.sections, m.tensors, m.rng, o, devices, &indices));
  RankLoad out;
  std::vector<BlockRead> reads;
  std::vector<Tensor> host(wants.size());
  for (size_t k = 0; k < wants.size(); ++k) {
    const TensorMeta& t = m.tensors[indices[k]];
    RCKPT_ASSIGN_OR_RETURN(host[k], Tensor::Empty(t.dtype, blocks[k].sizes));
    out.bytes_needed += host[k].nbytes();
    reads.push_back(BlockRead{&t, blocks[k], static_cast<std::byte*>(host[k].data())});
  }
  PipelineStats stats;
  RCKPT_RETURN_IF_ERROR(ReadBlocks(*reader, reads, PipelineOptionsOf(o, runtime), &stats));
  out.bytes_read = stats.bytes_read;
  for (size_t k = 0; k < wants.size(); ++k) {
    const TensorMeta& t = m.tensors[indices[k]];
    const Device target = plan.placements[k].target;
    TensorEntry e;
    e.name = t.name;
    e.section = t.section;
    e.role = t.role;
    e.origin = t.origin;
    if (target.is_cpu()) {
      e.tensor = std::move(host[k]);
    } else {
      RCKPT_ASSIGN_OR_RETURN(e.tensor, AllocateBlock(runtime, t.dtype, blocks[k].sizes, target));
      RCKPT_RETURN_IF_ERROR(UploadToDevice(runtime, target, e.tensor.data(),
                                           static_cast<const std::byte*>(host[k].data()),
                                           host[k].nbytes())
                                .WithContext("tensor '" + t.name + "'"));
    }
    out.blocks.push_back(std::move(e));
  }
  TakeRankState(m, rank, world_size, &out);
  return out;
}

}  // namespace

Result<RankLoad> LoadDistributed(MPI_Comm comm, const std::string& path,
                                 const std::vector<BlockRequest>& wants,
                                 const LoadOptions& options) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Result<RankLoad> r = LoadOnRank(rank, size, path, wants, options);
  RCKPT_RETURN_IF_ERROR(Agree(comm, r.status()));
  return r;
}

}  // namespace rckpt
