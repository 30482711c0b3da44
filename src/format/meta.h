// The on-disk vocabulary both halves of the format use: a chunk, a shard,
// a tensor and the manifest as plain C++ values. The writer fills them
// (engine/encode.cc, format/manifest.cc's BuildManifestFromMeta) and the
// reader produces them from a validated manifest (ParseManifest,
// FileReader); schema/FORMAT.md is the byte-level definition.
#ifndef RCKPT_SRC_FORMAT_META_H_
#define RCKPT_SRC_FORMAT_META_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/shard_geometry.h"
#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

// One stored chunk: the raw bytes [tensor_offset, tensor_offset + raw_size)
// of its tensor, stored at [offset, offset + stored_size) of the file.
struct ChunkMeta {
  uint64_t offset = 0;
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;
  uint64_t tensor_offset = 0;
  uint64_t checksum = 0;  // XXH3-64 of the stored bytes
  Codec codec = Codec::kNone;
  uint32_t shuffle_elem = 0;  // 0: no shuffle filter; else element size
};

// One block of a sharded tensor (format 1.1): the elements
// [offsets[d], offsets[d] + sizes[d]) of the global shape (the Block),
// stored row-major in chunks [first_chunk, first_chunk + num_chunks) of its
// tensor's `chunks`, whose tensor_offset counts from the start of the block.
struct ShardMeta : Block {
  int32_t rank = 0;
  Device origin;
  uint64_t nbytes = 0;  // numel(sizes) * dtype size
  size_t first_chunk = 0;
  size_t num_chunks = 0;
};

// A tensor as the manifest records it: its header and where its bytes are.
struct TensorMeta : TensorInfo {
  uint64_t nbytes = 0;
  // Unsharded: ordered by tensor_offset, covering nbytes. Sharded: every
  // shard's chunks, shard after shard.
  std::vector<ChunkMeta> chunks;
  std::vector<ShardMeta> shards;  // empty unless sharded

  bool sharded() const { return !shards.empty(); }
};

struct Manifest {
  uint32_t version_major = 0;
  uint32_t version_minor = 0;
  std::string writer;
  int64_t created_unix_ms = 0;
  uint32_t alignment = 0;
  uint64_t data_begin = 0;  // data region [data_begin, data_end)
  uint64_t data_end = 0;
  std::map<std::string, std::string> metadata;
  std::vector<SectionInfo> sections;
  std::vector<TensorMeta> tensors;
  std::vector<RngRecord> rng;
  Value tree;
  uint64_t manifest_offset = 0;
  uint64_t manifest_size = 0;
  uint64_t file_size = 0;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_META_H_
