// The pieces of a save that a single-process Save and a collective save
// (distributed.h) share: encoding tensors into chunks at a given file
// offset, and the manifest and footer that close a file.
#ifndef RCKPT_SRC_FORMAT_WRITER_H_
#define RCKPT_SRC_FORMAT_WRITER_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "format/file_reader.h"
#include "format/layout.h"
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

// InvalidArgument naming the field for options a save cannot use.
Status ValidateSaveOptions(const SaveOptions& options);

// Appends the chunks of `sources` to `file`, whose next byte is at file
// offset `start_offset`: each chunk aligned as FORMAT.md section 4 requires,
// gaps zero-filled. Encoding runs on options.threads workers, device tensors
// are staged through pinned memory. IoError (a failed write, or cancelled by
// options.progress), DeviceError, InvalidArgument (a tensor without data).
Status EncodeRegion(std::span<const SaveSource> sources, const SaveOptions& options,
                    WritableFile& file, uint64_t start_offset, EncodedRegion* region);

// The footer of a file whose data region ends at `data_end` and whose
// manifest (placed at the next multiple of 8) is `manifest`.
Footer FooterFor(uint64_t data_end, const std::vector<uint8_t>& manifest, uint16_t version_minor);

// Appends zero padding to a multiple of 8, the manifest and the footer to a
// file whose data region ends at `data_end` (its current size).
Status AppendManifestAndFooter(WritableFile& file, uint64_t data_end,
                               const std::vector<uint8_t>& manifest, uint16_t version_minor);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_WRITER_H_
