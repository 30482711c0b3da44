// Chunk codecs: XXH3-64 checksums, byte shuffle, zstd.
#ifndef RCKPT_SRC_CODEC_CODEC_H_
#define RCKPT_SRC_CODEC_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rckpt/status.h"

namespace rckpt {

// XXH3-64 with seed 0 of `data`.
// Uses the AVX2 build of XXH3 when the CPU has AVX2 (same value).
uint64_t Checksum(std::span<const std::byte> data);
// The same value from libxxhash's portable build (tests compare the two).
uint64_t ChecksumPortable(std::span<const std::byte> data);

// XXH3-64 (seed 0) of bytes given piece by piece: the same value as
// Checksum() of all of them. Hashing each piece right after it was read,
// while it is still in the CPU cache, costs about half of hashing a whole
// chunk afterwards (docs/PERFORMANCE.md, Checksums).
class ChecksumStream {
 public:
  ChecksumStream();  // std::bad_alloc when no state can be had
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void Update(std::span<const std::byte> piece);
  uint64_t Digest() const;

 private:
  void* state_;
  bool avx2_;
};

// Byte shuffle with element size `elem` (>= 2): output byte j*n_elem + i is
// input byte i*elem + j; a trailing partial element (size % elem bytes) is
// copied unchanged at the end. `dst` and `src` have equal size and must not
// overlap.
void ShuffleBytes(std::span<const std::byte> src, std::span<std::byte> dst,
                  uint32_t elem);
void UnshuffleBytes(std::span<const std::byte> src, std::span<std::byte> dst,
                    uint32_t elem);

// Worst-case compressed size of `raw_size` bytes.
size_t ZstdBound(size_t raw_size);

// Compresses `src` at `level` into `dst` (sized >= ZstdBound), returning
// the compressed size. One context per thread is reused internally.
Result<size_t> ZstdCompress(std::span<const std::byte> src,
                            std::span<std::byte> dst, int level);

// Decompresses one zstd frame into exactly dst.size() bytes. Corruption when
// the frame is malformed, declares a content size other than dst.size(), or
// produces more or fewer bytes. Never writes past dst.
Status ZstdDecompressExact(std::span<const std::byte> src,
                           std::span<std::byte> dst);

}  // namespace rckpt

#endif  // RCKPT_SRC_CODEC_CODEC_H_
