// The encoding half of a save, shared by Save (engine/save.cc) and the
// collective save (distributed/save.cc): a checkpoint's tensors cut into
// chunks, encoded on worker threads and appended to a file at a given
// offset through the format's ChunkWriter.
#ifndef RCKPT_SRC_ENGINE_ENCODE_H_
#define RCKPT_SRC_ENGINE_ENCODE_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "format/meta.h"
#include "rckpt/checkpoint.h"
#include "rckpt/file.h"
#include "rckpt/options.h"

namespace rckpt {

// One tensor (or shard block) whose bytes a save writes; `name` is for
// messages.
struct SaveSource {
  const Tensor* tensor = nullptr;
  std::string_view name;
};

// A checkpoint's sources in file order: its tensors, then every shard of its
// sharded tensors, tensor after tensor.
std::vector<SaveSource> SaveSourcesOf(const Checkpoint& ck);

// The chunks EncodeRegion wrote: source i has chunks
// [first_chunk[i], first_chunk[i + 1]) (the last up to chunks.size()), with
// absolute file offsets; the region ends at `end`.
struct EncodedRegion {
  std::vector<ChunkMeta> chunks;
  std::vector<uint64_t> first_chunk;
  uint64_t end = 0;
};

// Appends the chunks of `sources` to `file`, whose next byte is at file
// offset `start_offset`: each chunk aligned as FORMAT.md section 4 requires,
// gaps zero-filled. Encoding runs on options.threads workers, device tensors
// are staged through pinned memory (options.staging_bytes in all). IoError (a
// failed write, or cancelled by options.progress), DeviceError,
// InvalidArgument (a tensor without data).
Status EncodeRegion(std::span<const SaveSource> sources, const SaveOptions& options,
                    WritableFile& file, uint64_t start_offset, EncodedRegion* region);

// Where EncodeRegion's region starting at `start_offset` ends when every
// chunk is stored raw (options.codec == Codec::kNone): known before a byte
// is encoded. InvalidArgument for a tensor whose size overflows.
Result<uint64_t> RawRegionEnd(std::span<const SaveSource> sources, const SaveOptions& options,
                              uint64_t start_offset);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_ENCODE_H_
