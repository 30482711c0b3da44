// An in-memory FileSystem with fault injection, for tests and fuzzers: they
// need no disk and can make writes, syncs and renames fail on purpose.
#ifndef RCKPT_SRC_IO_MEM_FILE_H_
#define RCKPT_SRC_IO_MEM_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rckpt/file.h"

namespace rckpt {

class MemFileSystem : public FileSystem {
 public:
  MemFileSystem();
  ~MemFileSystem() override;

  // Puts bytes at a path directly.
  void SetFile(const std::string& path, std::vector<std::byte> bytes);
  // nullptr when absent. The pointer stays valid until the path is replaced
  // or removed; reading through it while a writer appends is a data race.
  const std::vector<std::byte>* GetFile(const std::string& path) const;

  // Fault injection. `fail_write_after_bytes`: an Append that would take a
  // file's total past this many bytes writes what fits, then fails with
  // IoError ("No space left on device").
  // (A positioned write that would take the file past it likewise.)
  // `fail_sync`: Sync fails with IoError. `fail_rename`: Rename fails with
  // IoError.
  struct Faults {
    uint64_t fail_write_after_bytes = UINT64_MAX;
    bool fail_sync = false;
    bool fail_rename = false;
  };
  void SetFaults(const Faults& faults);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(
      const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  Status SyncParentDir(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  bool Exists(const std::string& path) override;
  Result<std::unique_ptr<PositionedWritableFile>> OpenForPositionedWrite(
      const std::string& path) override;
  // Directories exist while a file lies below them: CreateDir makes none
  // (InvalidArgument where a file is); RemoveAll removes the files below.
  Status CreateDir(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_MEM_FILE_H_
