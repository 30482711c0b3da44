#include "engine/block_read.h"

#include <memory>
#include <string>

namespace rckpt {
namespace {

// The stored pieces of one tensor: its shards, or the whole tensor as one.
struct StoredBlock {
  Block block;
  size_t first_chunk = 0;
  size_t num_chunks = 0;
  std::string label;  // for messages: "w (shard 2)"
};

std::vector<StoredBlock> StoredBlocksOf(const TensorMeta& t) {
  std::vector<StoredBlock> out;
  if (!t.sharded()) {
    out.push_back({WholeBlock(t.shape), 0, t.chunks.size(), t.name});
    return out;
  }
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const ShardMeta& s = t.shards[i];
    out.push_back({Block{s.offsets, s.sizes}, s.first_chunk, s.num_chunks,
                   t.name + " (shard " + std::to_string(i) + ")"});
  }
  return out;
}

// What one wanted block needs from one stored block: the chunks holding the
// intersection, decoded into `scratch` (whose first byte is byte `skip` of
// the stored block's row-major layout) and copied into place, or decoded
// straight into place when the layouts allow (InPlaceTarget).
struct Piece {
  const BlockRead* read = nullptr;
  Block stored;
  Block region;
  uint64_t skip = 0;
  TensorMeta chunks;  // the needed chunks, tensor_offset counted from `skip`
  std::unique_ptr<std::byte[]> scratch;  // null when decoded straight into place
  std::byte* in_place = nullptr;
};

// Where the chunks of `p` can be decoded straight into the wanted block:
// they hold exactly the region (no byte before or after it), and the region
// is one contiguous run in both layouts (row or flat sharding read back with
// the same or a coarser split). Null otherwise.
std::byte* InPlaceTarget(const Piece& p, const ByteRange& need, size_t elem) {
  const uint64_t bytes = ShapeNumel(p.region.sizes).value() * elem;
  const ByteRange in_dst = SpanOf(p.read->block, p.region, elem);
  if (need.end - need.first != bytes || in_dst.end - in_dst.first != bytes ||
      p.skip != need.first || p.chunks.nbytes != bytes) {
    return nullptr;
  }
  return p.read->dst + in_dst.first;
}

}  // namespace

Status ReadBlocks(const FileReader& reader, const std::vector<BlockRead>& reads,
                  const PipelineOptions& options, PipelineStats* stats) {
  std::vector<Piece> pieces;
  for (const BlockRead& r : reads) {
    const TensorMeta& t = *r.tensor;
    const size_t elem = DTypeSize(t.dtype);
    for (const StoredBlock& sb : StoredBlocksOf(t)) {
      std::optional<Block> region = Intersect(r.block, sb.block);
      if (!region) continue;
      const ByteRange need = SpanOf(sb.block, *region, elem);
      Piece p;
      p.read = &r;
      p.stored = sb.block;
      p.region = *region;
      p.chunks.name = sb.label;
      p.chunks.dtype = t.dtype;
      bool first = true;
      for (size_t c = sb.first_chunk; c < sb.first_chunk + sb.num_chunks; ++c) {
        const ChunkMeta& cm = t.chunks[c];
        if (cm.tensor_offset + cm.raw_size <= need.first || cm.tensor_offset >= need.end) continue;
        if (first) p.skip = cm.tensor_offset, first = false;
        ChunkMeta rebased = cm;
        rebased.tensor_offset -= p.skip;
        p.chunks.chunks.push_back(rebased);
        p.chunks.nbytes += cm.raw_size;
      }
      p.chunks.shape = {static_cast<int64_t>(p.chunks.nbytes / elem)};
      p.in_place = InPlaceTarget(p, need, elem);
      if (p.in_place == nullptr) p.scratch.reset(new std::byte[p.chunks.nbytes]);
      pieces.push_back(std::move(p));
    }
  }
  std::vector<TensorDest> dests;
  dests.reserve(pieces.size());
  for (Piece& p : pieces) {
    dests.push_back(TensorDest{&p.chunks, Device::Cpu(), p.in_place ? p.in_place : p.scratch.get()});
  }
  RCKPT_RETURN_IF_ERROR(RunLoadPipeline(reader, dests, options, stats));
  for (const Piece& p : pieces) {
    if (p.in_place != nullptr) continue;
    CopyRegion(p.region, p.stored, p.scratch.get(), p.skip, p.read->block, p.read->dst,
               DTypeSize(p.read->tensor->dtype));
  }
  return Status::Ok();
}

PipelineOptions PipelineOptionsOf(const LoadOptions& o, DeviceRuntime& rt,
                                  const std::byte* mapped_file) {
  PipelineOptions p;
  p.mapped_file = mapped_file;
  p.runtime = &rt;
  p.verify_checksums = o.verify_checksums;
  p.threads = o.threads;
  p.staging_bytes = o.staging_bytes;
  p.progress = o.progress;
  return p;
}

Status UploadToDevice(DeviceRuntime& runtime, Device device, void* dst, const std::byte* src,
                      uint64_t n) {
  RCKPT_ASSIGN_OR_RETURN(Stream stream, runtime.CreateStream(device));
  Status s = runtime.CopyToDeviceAsync(device, stream, dst, src, n);
  if (s.ok()) s = runtime.Synchronize(device, stream);
  runtime.DestroyStream(device, stream);
  return s;
}

}  // namespace rckpt
