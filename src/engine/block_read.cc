#include "engine/block_read.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "format/chunk_codec.h"

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

// What one wanted block needs from one stored block. In general: the chunks
// holding the intersection (`region`), decoded into `scratch` (whose first
// byte is byte `skip` of the stored block's row-major layout) and copied
// into place. When the region is one contiguous run in both layouts (row and
// flat shards), the chunks wholly inside it are decoded straight into place
// (`in_place`), and each chunk crossing its ends is decoded into `scratch`
// and only its share copied (`copy_*`).
struct Piece {
  const BlockRead* read = nullptr;
  Block stored;
  Block region;
  uint64_t skip = 0;
  TensorMeta chunks;  // tensor_offset counted from the first of them
  std::unique_ptr<std::byte[]> scratch;
  // The chunks' raw bytes in the mapped file, used where `scratch` would
  // be (set when the file is mapped and the chunks are stored raw, one
  // after another): nothing is decoded, the checksums are verified there.
  const std::byte* mapped = nullptr;
  std::byte* in_place = nullptr;
  std::byte* copy_to = nullptr;  // set for a chunk crossing a contiguous region's end
  uint64_t copy_from = 0;
  uint64_t copy_bytes = 0;
};

Piece NewPiece(const BlockRead& r, const StoredBlock& sb, const Block& region) {
  Piece p;
  p.read = &r;
  p.stored = sb.block;
  p.region = region;
  p.chunks.name = sb.label;
  p.chunks.dtype = r.tensor->dtype;
  return p;
}

void AddChunk(Piece& p, const ChunkMeta& c) {
  if (p.chunks.chunks.empty()) p.skip = c.tensor_offset;
  ChunkMeta rebased = c;
  rebased.tensor_offset -= p.skip;
  p.chunks.chunks.push_back(rebased);
  p.chunks.nbytes += c.raw_size;
  p.chunks.shape = {static_cast<int64_t>(p.chunks.nbytes / DTypeSize(p.chunks.dtype))};
}

// The pieces that read `region` of stored block `sb` into `r`.
void PlanPieces(const BlockRead& r, const StoredBlock& sb, const Block& region,
                std::vector<Piece>* out) {
  const TensorMeta& t = *r.tensor;
  const size_t elem = DTypeSize(t.dtype);
  const ByteRange need = SpanOf(sb.block, region, elem);
  const ByteRange in_dst = SpanOf(r.block, region, elem);
  const uint64_t bytes = ShapeNumel(region.sizes).value() * elem;
  const bool contiguous =
      need.end - need.first == bytes && in_dst.end - in_dst.first == bytes;
  Piece general = NewPiece(r, sb, region);
  Piece inside = NewPiece(r, sb, region);
  for (size_t i = sb.first_chunk; i < sb.first_chunk + sb.num_chunks; ++i) {
    const ChunkMeta& c = t.chunks[i];
    const uint64_t c_end = c.tensor_offset + c.raw_size;
    if (c_end <= need.first || c.tensor_offset >= need.end) continue;
    if (!contiguous) {
      AddChunk(general, c);
    } else if (c.tensor_offset >= need.first && c_end <= need.end) {
      if (inside.chunks.chunks.empty()) {
        inside.in_place = r.dst + in_dst.first + (c.tensor_offset - need.first);
      }
      AddChunk(inside, c);
    } else {
      Piece edge = NewPiece(r, sb, region);
      AddChunk(edge, c);
      const uint64_t from = std::max(c.tensor_offset, need.first);
      edge.copy_to = r.dst + in_dst.first + (from - need.first);
      edge.copy_from = from - c.tensor_offset;
      edge.copy_bytes = std::min(c_end, need.end) - from;
      out->push_back(std::move(edge));
    }
  }
  if (!general.chunks.chunks.empty()) out->push_back(std::move(general));
  if (!inside.chunks.chunks.empty()) out->push_back(std::move(inside));
}

// Where the piece's chunks lie raw and in order in the mapped file, or null.
const std::byte* MappedSource(const Piece& p, const std::byte* mapped_file) {
  if (mapped_file == nullptr || !StoredRawInOrder(p.chunks.chunks)) return nullptr;
  return mapped_file + p.chunks.chunks.front().offset;
}

}  // namespace

Status ReadBlocks(const FileReader& reader, const std::vector<BlockRead>& reads,
                  const PipelineOptions& options, PipelineStats* stats) {
  std::vector<Piece> pieces;
  for (const BlockRead& r : reads) {
    for (const StoredBlock& sb : StoredBlocksOf(*r.tensor)) {
      std::optional<Block> region = Intersect(r.block, sb.block);
      if (region) PlanPieces(r, sb, *region, &pieces);
    }
  }
  std::vector<TensorDest> dests;
  dests.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (p.in_place != nullptr) {
      dests.push_back(TensorDest{&p.chunks, Device::Cpu(), p.in_place});
      continue;
    }
    p.mapped = MappedSource(p, options.mapped_file);
    if (p.mapped != nullptr) {
      // The pipeline only verifies the mapped bytes; nothing moves.
      dests.push_back(TensorDest{&p.chunks, Device::Cpu(), const_cast<std::byte*>(p.mapped),
                                 /*in_place=*/true});
      continue;
    }
    p.scratch.reset(new std::byte[p.chunks.nbytes]);
    dests.push_back(TensorDest{&p.chunks, Device::Cpu(), p.scratch.get()});
  }
  RCKPT_RETURN_IF_ERROR(RunLoadPipeline(reader, dests, options, stats));
  for (const Piece& p : pieces) {
    if (p.in_place != nullptr) continue;
    const std::byte* src = p.mapped != nullptr ? p.mapped : p.scratch.get();
    if (p.copy_to != nullptr) {
      std::memcpy(p.copy_to, src + p.copy_from, p.copy_bytes);
      continue;
    }
    CopyRegion(p.region, p.stored, src, p.skip, p.read->block, p.read->dst,
               DTypeSize(p.read->tensor->dtype));
  }
  return Status::Ok();
}

}  // namespace rckpt
