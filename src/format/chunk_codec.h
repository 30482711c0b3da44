// The chunk record's two halves, side by side: how a save turns a chunk's
// raw bytes into the stored bytes a ChunkMeta describes (EncodeChunk), and
// how a load turns them back (DecodeChunk). schema/FORMAT.md section 4 is the
// byte-level definition; the manifest's validation of a chunk's fields is
// ValidateChunk in format/manifest.cc. A new codec is a case in both
// functions here plus its byte in that validation.
#ifndef RCKPT_SRC_FORMAT_CHUNK_CODEC_H_
#define RCKPT_SRC_FORMAT_CHUNK_CODEC_H_

#include <cstdint>
#include <span>

#include "format/meta.h"
#include "rckpt/dtype.h"
#include "rckpt/options.h"
#include "rckpt/status.h"
#include "util/host_memory.h"

namespace rckpt {

// The shuffle element size a chunk of `dtype` is encoded with under `codec`
// and `shuffle` (0: no shuffle filter). Only compressed chunks are
// shuffled; kAuto shuffles floating-point dtypes; complex numbers shuffle as
// their real components; one-byte dtypes never.
uint32_t ShuffleElemFor(DType dtype, Codec codec, Shuffle shuffle);

// The most bytes EncodeChunk may write to `frame` for `raw_size` raw bytes.
uint64_t EncodedBound(Codec codec, uint64_t raw_size);

// Encodes one chunk's `raw` bytes and fills `meta`'s raw_size, stored_size,
// codec, shuffle_elem and checksum (XXH3-64 of the stored bytes); offset and
// tensor_offset are the caller's. Returns the stored bytes: a prefix of
// `frame` (EncodedBound(codec, raw.size()) bytes), or `raw` itself when the
// codec is kNone or the chunk does not compress (then stored raw and
// unshuffled, so that decoding it is a plain read). `shuffled` is work space
// of raw.size() bytes, used when `shuffle_elem` is not 0. Errors are zstd's.
Result<std::span<const std::byte>> EncodeChunk(std::span<const std::byte> raw, Codec codec,
                                               int level, uint32_t shuffle_elem,
                                               std::span<std::byte> shuffled,
                                               std::span<std::byte> frame, ChunkMeta* meta);

// Turns a chunk's `stored` bytes (c.stored_size) into its raw bytes in `dst`
// (c.raw_size): decompresses, then undoes the shuffle, unless
// `keep_shuffled` (the caller unshuffles on a device). `stored` and `dst` may
// be the same bytes for a chunk stored raw and unshuffled. `scratch` is grown
// as needed (a chunk both compressed and shuffled). The checksum is not
// checked here. Corruption (zstd's message) when the chunk does not decode to
// exactly c.raw_size bytes.
Status DecodeChunk(const ChunkMeta& c, std::span<const std::byte> stored,
                   std::span<std::byte> dst, ScratchBuffer& scratch, bool keep_shuffled = false);

// Whether a chunk's stored bytes are its raw bytes (no codec, no shuffle),
// so that a reader may read them straight into place.
inline bool StoredRaw(const ChunkMeta& c) {
  return c.codec == Codec::kNone && c.shuffle_elem == 0;
}

// Whether `chunks` (of one tensor or block, in tensor order) are all stored
// raw and lie back to back in the file, chunk i at chunks.front().offset +
// its tensor_offset: their bytes are then one extent of the file. False when
// empty.
bool StoredRawInOrder(std::span<const ChunkMeta> chunks);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_CHUNK_CODEC_H_
