// Reading blocks of tensors: the part of a tensor a caller wants, cut out of
// however the file stores it (whole, or as the shards of format 1.1). Only
// the chunks that hold some of a wanted block's elements are read. A
// single-process load assembles a sharded tensor with one block (the whole
// shape); a rank of a resharded load asks for its own blocks.
#ifndef RCKPT_SRC_ENGINE_BLOCK_READ_H_
#define RCKPT_SRC_ENGINE_BLOCK_READ_H_

#include <cstddef>
#include <vector>

#include "engine/pipeline.h"
#include "format/file_reader.h"
#include "core/shard_geometry.h"

namespace rckpt {

// Block `block` of `tensor`, to be written row-major into host memory `dst`
// (numel(block.sizes) * dtype size bytes). The block lies inside the
// tensor's shape (CheckBlockInShape).
struct BlockRead {
  const TensorMeta* tensor = nullptr;
  Block block;
  std::byte* dst = nullptr;
};

// Fills every `dst`: decodes, through the load pipeline into host scratch
// memory, the chunks that meet the wanted blocks (checksums verified as
// options say), then copies each intersection into place. Raw chunks of a
// mapped file (options.mapped_file) are verified and copied from the mapping
// instead, with no scratch. Peak extra memory is the decoded bytes of the
// other chunks. `stats` (may be null) counts the bytes read and restored.
// Errors as RunLoadPipeline.
Status ReadBlocks(const FileReader& reader, const std::vector<BlockRead>& reads,
                  const PipelineOptions& options, PipelineStats* stats);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_BLOCK_READ_H_
