// POSIX file internals, exposed so tests can drive the I/O loops with small
// per-call sizes.
#ifndef RCKPT_SRC_IO_POSIX_FILE_H_
#define RCKPT_SRC_IO_POSIX_FILE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "rckpt/file.h"

namespace rckpt {

// The most bytes one read(2)/write(2) call is asked to move. Linux moves at
// most 0x7ffff000 bytes per call, so larger buffers always take a loop.
inline constexpr size_t kPosixMaxIoBytes = size_t{1} << 30;

// PosixFileSystem's files, with each read/write call limited to
// `max_io_bytes` (> 0).
Result<std::unique_ptr<RandomAccessFile>> OpenPosixRandomAccessFile(
    const std::string& path, size_t max_io_bytes = kPosixMaxIoBytes);
Result<std::unique_ptr<WritableFile>> OpenPosixWritableFile(
    const std::string& path, size_t max_io_bytes = kPosixMaxIoBytes);

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_POSIX_FILE_H_
