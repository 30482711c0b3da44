// File access: every byte rckpt reads or writes goes through these small
// interfaces. PosixFileSystem() is the default; a program may pass its own
// FileSystem (SaveOptions::fs, LoadOptions::fs) to place checkpoints
// elsewhere. (The library's tests use an in-memory one with fault
// injection.)
#ifndef RCKPT_FILE_H_
#define RCKPT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/status.h"

namespace rckpt {

// A file opened for reading at arbitrary offsets.
// Thread-safety: ReadAt may be called concurrently.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual uint64_t Size() const = 0;
  // Reads exactly dst.size() bytes at `offset`. IoError on an OS failure,
  // Corruption ("truncated") when the file ends first.
  virtual Status ReadAt(uint64_t offset, std::span<std::byte> dst) const = 0;
  // The whole file (Size() bytes) mapped into memory copy-on-write: writes
  // through the pointer change this process's pages, never the file. The
  // mapping lives while any copy of the pointer does. Unsupported where the
  // file cannot be mapped (the default). Truncating the file while it is
  // mapped makes reading the lost part fault the process (SIGBUS).
  virtual Result<std::shared_ptr<std::byte>> MapPrivate() const {
    return Status::Unsupported("this file cannot be mapped");
  }
};

// A file being written sequentially. Not thread-safe.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` (loops over short writes and > 2 GiB writes).
  virtual Status Append(std::span<const std::byte> data) = 0;
  // Flushes to stable storage (fsync).
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

// A file system: where files are opened, renamed and removed.
// Thread-safety: all methods may be called concurrently.
class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // NotFound for a missing path, InvalidArgument for a directory, IoError
  // otherwise.
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForRead(
      const std::string& path) = 0;
  // Creates or truncates.
  virtual Result<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // fsync of the directory holding `path`, so a rename is durable.
  virtual Status SyncParentDir(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`.
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The process-wide POSIX file system.
FileSystem& PosixFileSystem();

}  // namespace rckpt

#endif  // RCKPT_FILE_H_
