// FileReader: opens a .rckpt file in verify-then-trust order and exposes its
// manifest as plain C++ values, plus chunk-level reads for the load engine.
#ifndef RCKPT_SRC_FORMAT_FILE_READER_H_
#define RCKPT_SRC_FORMAT_FILE_READER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "format/meta.h"
#include "rckpt/file.h"
#include "rckpt/options.h"
#include "util/host_memory.h"

namespace rckpt {

class FileReader {
 public:
  // Opens and fully validates the structure (not the chunk checksums).
  // NotFound, InvalidArgument (a directory), Corruption, Unsupported.
  static Result<std::unique_ptr<FileReader>> Open(FileSystem& fs,
                                                  const std::string& path);
  static Result<std::unique_ptr<FileReader>> Open(
      std::unique_ptr<RandomAccessFile> file, const std::string& path);

  const Manifest& manifest() const { return manifest_; }
  const RandomAccessFile& file() const { return *file_; }
  const std::string& path() const { return path_; }

  // Reads a chunk's stored bytes into `stored` (size == chunk.stored_size).
  Status ReadStored(const ChunkMeta& chunk, std::span<std::byte> stored) const;

  // "'<path>': tensor '<name>': chunk <i> at offset <n>", for messages.
  std::string ChunkWhere(const TensorMeta& tensor, size_t chunk_index) const;
  // Corruption naming the chunk unless `computed` is its recorded checksum.
  Status CheckChecksum(const TensorMeta& tensor, size_t chunk_index, uint64_t computed) const;
  // Fills `stored` (the chunk's stored_size bytes) by reading them, or by
  // copying them from `src` when it is not null, and verifies the checksum.
  // Chunks over kHashPieceBytes are moved and hashed piece by piece, each
  // piece while it is still in the CPU cache: 1.3x faster than hashing a
  // whole 4 MiB chunk after reading it (docs/PERFORMANCE.md, Checksums).
  Status ReadVerified(const TensorMeta& tensor, size_t chunk_index, std::span<std::byte> stored,
                      const std::byte* src = nullptr) const;
  static constexpr uint64_t kHashPieceBytes = 256ull << 10;

  // Turns stored bytes into raw bytes: checks the checksum when `verify`,
  // decompresses, unshuffles. `dst` has chunk.raw_size bytes. `scratch` is
  // grown as needed (used when a chunk is both compressed and shuffled).
  // When `keep_shuffled` is true the shuffle filter is not undone (the caller
  // unshuffles on the device). Corruption names tensor, chunk and what failed.
  Status DecodeChunk(const TensorMeta& tensor, size_t chunk_index,
                     std::span<const std::byte> stored, std::span<std::byte> dst,
                     ScratchBuffer& scratch, bool verify,
                     bool keep_shuffled = false) const;

  // Reads and decodes a whole tensor into host memory `dst` (nbytes).
  Status ReadTensorToHost(const TensorMeta& tensor, std::span<std::byte> dst,
                          bool verify) const;

  // Checks that the padding is zero (VerifyZeroPadding, format/padding.h),
  // then every chunk's checksum and decodability. Corruption on the first
  // failure. Loads do not run it: they check the chunks they read.
  Status VerifyAll(const ProgressCallback& progress = {}) const;

  // Checks one chunk: its checksum, then (compressed chunks) that it
  // decodes to its raw size. The buffers are work space.
  Status VerifyChunk(const TensorMeta& tensor, size_t chunk_index, ScratchBuffer& stored,
                     ScratchBuffer& raw, ScratchBuffer& scratch) const;

 private:
  FileReader() = default;
  std::unique_ptr<RandomAccessFile> file_;
  std::string path_;
  Manifest manifest_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_FILE_READER_H_
