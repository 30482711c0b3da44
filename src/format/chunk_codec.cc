#include "format/chunk_codec.h"

#include <cstring>

#include "codec/codec.h"

namespace rckpt {

uint32_t ShuffleElemFor(DType dtype, Codec codec, Shuffle shuffle) {
  if (codec != Codec::kZstd || shuffle == Shuffle::kOff) return 0;
  if (shuffle == Shuffle::kAuto && !IsFloatingDType(dtype)) return 0;
  switch (dtype) {
    case DType::kC64: return 4;
    case DType::kC128: return 8;
    default: {
      const size_t s = DTypeSize(dtype);
      return s >= 2 ? static_cast<uint32_t>(s) : 0;
    }
  }
}

uint64_t EncodedBound(Codec codec, uint64_t raw_size) {
  return codec == Codec::kZstd ? ZstdBound(raw_size) : 0;
}

Result<std::span<const std::byte>> EncodeChunk(std::span<const std::byte> raw, Codec codec,
                                               int level, uint32_t shuffle_elem,
                                               std::span<std::byte> shuffled,
                                               std::span<std::byte> frame, ChunkMeta* meta) {
  meta->raw_size = raw.size();
  meta->codec = Codec::kNone;
  meta->shuffle_elem = 0;
  std::span<const std::byte> stored = raw;
  if (codec == Codec::kZstd) {
    std::span<const std::byte> input = raw;
    if (shuffle_elem != 0) {
      shuffled = shuffled.first(raw.size());
      ShuffleBytes(raw, shuffled, shuffle_elem);
      input = shuffled;
    }
    // A full ZstdBound for every frame: with less room zstd may give up on a
    // small input it would have compressed (a 768-byte chunk at level 3), and
    // the file would differ.
    RCKPT_ASSIGN_OR_RETURN(size_t n, ZstdCompress(input, frame.first(ZstdBound(raw.size())), level));
    // Incompressible chunks are kept raw: decoding them is then a plain read.
    if (n < raw.size()) {
      stored = frame.first(n);
      meta->codec = Codec::kZstd;
      meta->shuffle_elem = shuffle_elem;
    }
  }
  meta->stored_size = stored.size();
  meta->checksum = Checksum(stored);
  return stored;
}

Status DecodeChunk(const ChunkMeta& c, std::span<const std::byte> stored,
                   std::span<std::byte> dst, ScratchBuffer& scratch, bool keep_shuffled) {
  const bool unshuffle = c.shuffle_elem != 0 && !keep_shuffled;
  if (c.codec == Codec::kNone) {
    if (unshuffle) {
      UnshuffleBytes(stored, dst, c.shuffle_elem);
    } else if (stored.data() != dst.data()) {
      std::memcpy(dst.data(), stored.data(), c.raw_size);
    }
    return Status::Ok();
  }
  if (!unshuffle) return ZstdDecompressExact(stored, dst);
  std::span<std::byte> shuffled = scratch.Get(c.raw_size);
  RCKPT_RETURN_IF_ERROR(ZstdDecompressExact(stored, shuffled));
  UnshuffleBytes(shuffled, dst, c.shuffle_elem);
  return Status::Ok();
}

bool StoredRawInOrder(std::span<const ChunkMeta> chunks) {
  if (chunks.empty()) return false;
  const uint64_t first = chunks.front().offset;
  for (const ChunkMeta& c : chunks) {
    if (!StoredRaw(c) || c.offset != first + c.tensor_offset) return false;
  }
  return true;
}

}  // namespace rckpt
