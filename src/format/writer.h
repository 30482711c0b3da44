// Lays out the bytes of a .rckpt file (schema/FORMAT.md): the header, chunk
// frames at aligned offsets with zero padding between them, then padding to
// a multiple of 8, the manifest and the footer. It knows nothing of tensors,
// codecs or devices: the save engine (engine/save.cc) encodes chunks and
// hands their stored bytes here.
#ifndef RCKPT_SRC_FORMAT_WRITER_H_
#define RCKPT_SRC_FORMAT_WRITER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "format/layout.h"
#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

// Where a chunk of `stored_size` bytes starts when the data before it ends
// at `offset`: the next multiple of `alignment` for chunks at least that
// large, of kMinAlignment for smaller ones (FORMAT.md section 4).
uint64_t ChunkOffset(uint64_t offset, uint64_t stored_size, uint32_t alignment);

// Appends chunk frames to a file whose next byte is at file offset `offset`,
// each at its ChunkOffset with the gap zero-filled. Small appends are
// gathered so the file sees few large writes. Not thread-safe.
class ChunkWriter {
 public:
  ChunkWriter(WritableFile& file, uint64_t offset, uint32_t alignment);

  // Pads and appends `stored`; returns the offset it was placed at. IoError
  // from the file.
  Result<uint64_t> Append(std::span<const std::byte> stored);

  // Writes what is gathered. Call before anything else writes to the file.
  Status Flush();

  // The file offset after the last byte appended.
  uint64_t offset() const { return offset_; }

 private:
  Status Write(std::span<const std::byte> data);
  Status PadTo(uint64_t offset);

  static constexpr size_t kBufSize = 1 << 20;
  // Copying a large append into the buffer cost more than the extra write(2)
  // it saves.
  static constexpr size_t kDirectBytes = 64 << 10;
  WritableFile& file_;
  std::vector<std::byte> buf_;
  uint64_t offset_;
  uint32_t alignment_;
};

// The header of a file with chunks aligned to `alignment` declaring format
// 1.`version_minor`.
Status WriteHeader(WritableFile& file, uint32_t alignment, uint16_t version_minor);

// The footer of a file whose data region ends at `data_end` and whose
// manifest (placed at the next multiple of 8) is `manifest`.
Footer FooterFor(uint64_t data_end, const std::vector<uint8_t>& manifest, uint16_t version_minor);

// Appends zero padding to a multiple of 8, the manifest and the footer to a
// file whose data region ends at `data_end` (its current size).
Status AppendManifestAndFooter(WritableFile& file, uint64_t data_end,
                               const std::vector<uint8_t>& manifest, uint16_t version_minor);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_WRITER_H_
