// Restoring tensors of an open file into new host memory, decoding each chunk
// in place on worker threads (no staging copy).
#ifndef RCKPT_SRC_FORMAT_HOST_LOAD_H_
#define RCKPT_SRC_FORMAT_HOST_LOAD_H_

#include <vector>

#include "format/file_reader.h"
#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

// Decodes chunks [begin, end) of `items` into their destinations on
// `threads` workers; progress is reported from the calling thread.
struct ChunkTask {
  const TensorMeta* tensor;
  size_t chunk;
  std::byte* dst;  // start of the tensor's host buffer
};
Status DecodeChunksToHost(const FileReader& reader, const std::vector<ChunkTask>& tasks,
                          bool verify, int threads, const ProgressCallback& progress);

// A checkpoint holding the tensors `indices` (into manifest().tensors) in
// new host memory, plus every section, RNG record, the tree and metadata.
Result<Checkpoint> LoadTensorsToHost(const FileReader& reader, const std::vector<size_t>& indices,
                                     bool verify, int threads, const ProgressCallback& progress);

// The checkpoint's skeleton (sections, RNG records, tree, metadata) without
// tensors.
Result<Checkpoint> CheckpointSkeleton(const Manifest& m);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_HOST_LOAD_H_
