// The one place a path picks its file system: s3:// URLs go to an S3 file
// system, every other path to a local one. DefaultFileSystem() is such a
// router over PosixFileSystem() and the S3 file system of the environment;
// NewS3FileSystem (rckpt/s3.h) returns one over an S3 file system with the
// caller's options.
#ifndef RCKPT_SRC_IO_URL_FILE_SYSTEM_H_
#define RCKPT_SRC_IO_URL_FILE_SYSTEM_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/file.h"

namespace rckpt {

// Makes the S3 file system, at the first s3:// path a router meets (an error
// is kept and returned for every later s3:// path), and again in a child
// process made by fork(), where the parent's transport thread does not run.
using S3FileSystemFactory = std::function<Result<std::unique_ptr<FileSystem>>()>;

// The S3 file system configured from the environment and the AWS
// configuration files (s3/, or an Unsupported error naming the missing
// build option when rckpt was built without S3).
Result<std::unique_ptr<FileSystem>> NewEnvironmentS3FileSystem();

// InvalidArgument for a path that begins with the object-storage scheme in
// another case ("S3://", "s3://" being the only form, IsObjectStoreUrl):
// it is neither a URL nor a local path anyone means. OK for any other path.
Status CheckSchemeCase(std::string_view path);

class UrlFileSystem final : public FileSystem {
 public:
  UrlFileSystem(FileSystem& local, S3FileSystemFactory make_s3);
  // With an S3 file system made already.
  UrlFileSystem(FileSystem& local, std::unique_ptr<FileSystem> s3);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  Status SyncParentDir(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  bool Exists(const std::string& path) override;
  Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicWrite(const std::string& path,
                                                                 uint64_t expected_size) override;
  Result<std::vector<FileInfo>> List(const std::string& prefix) override;
  Result<std::vector<IncompleteWrite>> ListIncomplete(const std::string& prefix) override;
  Status AbortIncomplete(const IncompleteWrite& write) override;
  Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicCreate(const std::string& path,
                                                                  uint64_t expected_size) override;
  Status RenameNoReplace(const std::string& from, const std::string& to) override;
  Result<std::unique_ptr<PositionedWritableFile>> OpenForPositionedWrite(
      const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;
  Result<SharedWrite> StartSharedWrite(const std::string& path) override;
  Result<std::unique_ptr<SharedWriteRegion>> OpenSharedWriteRegion(
      const std::string& path, const SharedWrite& write, uint64_t first_part,
      std::vector<uint64_t> part_bytes) override;
  Status CommitSharedWrite(const std::string& path, const SharedWrite& write,
                           std::span<const SharedPart> parts) override;
  Status AbortSharedWrite(const std::string& path,
                          const SharedWrite& write) override;
  Result<bool> SharedWriteCommitted(const std::string& path,
                                    const SharedWrite& write) override;

 private:
  // The file system serving `path`.
  Result<FileSystem*> For(const std::string& path);

  FileSystem& local_;
  S3FileSystemFactory make_s3_;
  std::mutex mu_;
  std::optional<Result<std::unique_ptr<FileSystem>>> s3_;  // made once per process
  int s3_pid_ = 0;  // the process s3_ was made in
};

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_URL_FILE_SYSTEM_H_
