// A minimal ZIP reader and writer for PyTorch's torch.save archives.
//
// Reading supports what torch.save (miniz) writes and what other tools may
// produce: stored (uncompressed) entries, ZIP64 end records and extra fields,
// data descriptors (sizes are taken from the central directory, never from
// local headers) and any local-header extra field, such as PyTorch's "FB"
// alignment padding. Every offset and size is bounds-checked with
// overflow-safe arithmetic; a malformed archive yields Corruption naming the
// structure and its offset. Compressed (deflate) entries yield Unsupported.
//
// Writing produces stored entries whose data start at a multiple of the
// requested alignment (padding in an "FB" extra field, as PyTorch does), real
// CRC-32s, and ZIP64 records only where sizes or offsets need them.
#ifndef RCKPT_SRC_CONVERT_ZIP_H_
#define RCKPT_SRC_CONVERT_ZIP_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convert/crc32.h"
#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt::convert {

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // absolute file offset of the entry's bytes
  uint64_t size = 0;         // uncompressed == stored size
  uint32_t crc32 = 0;        // from the central directory
  uint64_t header_offset = 0;
  uint16_t method = 0;       // 0: stored; anything else cannot be read here
};

struct ZipLimits {
  uint64_t max_entries = 1u << 20;
};

// The central directory of an archive, in directory order.
struct ZipDirectory {
  std::vector<ZipEntry> entries;

  // nullptr when absent.
  const ZipEntry* Find(std::string_view name) const;
};

// Parses the directory of the archive held by `file` (reading only the end
// records, the central directory and each local header). Corruption for any
// structural error; Unsupported for encrypted entries and multi-disk
// archives. Compressed entries are listed (method != 0) but their data
// cannot be read; callers refuse them when they need one.
Result<ZipDirectory> ReadZipDirectory(const RandomAccessFile& file,
                                      const ZipLimits& limits = {});

// The same over bytes in memory (the fuzz entry point for the zip reader).
Result<ZipDirectory> ReadZipDirectoryFromBytes(std::span<const std::byte> bytes,
                                               const ZipLimits& limits = {});

// A RandomAccessFile over a caller-owned byte span.
class SpanFile : public RandomAccessFile {
 public:
  explicit SpanFile(std::span<const std::byte> bytes) : bytes_(bytes) {}
  uint64_t Size() const override { return bytes_.size(); }
  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override;

 private:
  std::span<const std::byte> bytes_;
};

// Writes a stored-entry archive sequentially to `out`.
class ZipWriter {
 public:
  // `alignment` (a power of two, 1..65536) is where each entry's data starts.
  ZipWriter(WritableFile* out, uint32_t alignment);

  // Appends one entry. InvalidArgument for an empty or overlong name; IoError
  // from the file.
  Status Add(std::string_view name, std::span<const std::byte> data);
  // Writes the central directory and end records. Does not sync or close.
  Status Finish();

 private:
  struct Written {
    std::string name;
    uint64_t header_offset;
    uint64_t size;
    uint32_t crc;
  };
  Status Write(std::span<const std::byte> bytes);

  WritableFile* out_;
  uint32_t alignment_;
  uint64_t offset_ = 0;
  std::vector<Written> written_;
};

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_ZIP_H_
