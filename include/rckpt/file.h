// File access: every byte rckpt reads or writes goes through these small
// interfaces, so a checkpoint can live on a local disk or in object storage
// (s3://BUCKET/KEY) and the engine never knows which.
//
// DefaultFileSystem() is what every entry point uses when its options name
// no file system: it picks the implementation from the path, in one place
// (s3:// URLs: S3, rckpt/s3.h; anything else: POSIX). A program may pass its
// own FileSystem (SaveOptions::fs, LoadOptions::fs, ImportOptions::fs, ...):
// NewS3FileSystem (rckpt/s3.h) for an explicit endpoint and credentials, or
// one of its own. (The library's tests use an in-memory one with fault
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

// One range of a ReadRanges call: `dst.size()` bytes at `offset`.
struct ReadRange {
  uint64_t offset = 0;
  std::span<std::byte> dst;
};

// A file opened for reading at arbitrary offsets.
// Thread-safety: ReadAt and ReadRanges may be called concurrently.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual uint64_t Size() const = 0;
  // Reads exactly dst.size() bytes at `offset`. IoError on an OS or network
  // failure, Corruption ("truncated") when the file ends first.
  virtual Status ReadAt(uint64_t offset, std::span<std::byte> dst) const = 0;
  // Reads every range, with as many requests in flight as the file serves
  // well (an object store: many; a local file: one after the other, the
  // default). Returns the first error once every read has stopped; the
  // contents of the ranges are then unspecified.
  virtual Status ReadRanges(std::span<const ReadRange> ranges) const;
  // How many ReadAt calls this file serves well at once: 0 (the default)
  // when reads are bound by the CPU and the disk, so callers use their CPU
  // thread count; an object store answers with its requests in flight, so a
  // load waits on the network with that many reads, whatever the cores.
  virtual int ReadConcurrency() const { return 0; }
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

// A file written at offsets the caller picks, each process through a handle
// of its own: the temporary into which every rank of a collective save
// writes its own extent (rckpt/distributed.h). Not thread-safe.
class PositionedWritableFile {
 public:
  virtual ~PositionedWritableFile() = default;
  // Writes all of `data` at `offset`, the file growing as needed.
  virtual Status WriteAt(uint64_t offset, std::span<const std::byte> data) = 0;
  // Flushes this handle's writes to stable storage (fsync).
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

// A file that appears at its path only when Commit succeeds, whole: until
// then readers see what was there before (or nothing), and a failed or
// abandoned write never shows. Locally a temporary beside the path that is
// synced and renamed over it (io/atomic_write.h); in S3 a multipart upload
// that CompleteMultipartUpload makes the object. Sync and Close are part of
// Commit (calling them first is allowed). Destroying the file without a
// successful Commit aborts it. Not thread-safe.
class AtomicWritableFile : public WritableFile {
 public:
  // Makes everything appended visible at the path at once, replacing what
  // was there, durably. On failure nothing new is visible (the previous
  // file stays) and the write is aborted.
  virtual Status Commit() = 0;
  // Discards the write; the previous file stays. Calling it twice, or after
  // a failed Commit, is OK.
  virtual Status Abort() = 0;
};

// An entry of FileSystem::List.
struct FileInfo {
  std::string path;              // the listing's prefix followed by the rest
  uint64_t size = 0;
  int64_t modified_unix_ms = 0;  // 0 where unknown
};

// A write begun and never committed or aborted (a crashed or killed save):
// locally a temporary "<path>.tmp-<pid>-<hex>" left beside the path; in S3
// an incomplete multipart upload, invisible to readers but stored (and
// billed) until it is aborted.
struct IncompleteWrite {
  std::string path;              // the path the write would have replaced
  std::string id;                // the temporary's path; the S3 upload id
  int64_t started_unix_ms = 0;   // 0 where unknown
  // The writing process still runs on this machine (local writes only: an
  // S3 upload's writer is unknown, and it may still be in progress).
  bool writer_alive = false;
};

// Shared writes: one file written by several processes at once (the ranks
// of a collective save), each uploading its own numbered parts: in object
// storage a multipart upload whose id the process that started it hands
// to the others. The file appears, whole, only when the parts are committed
// together; until then readers see what was there before. A write that is
// aborted, or whose processes all die, leaves the previous file (a killed
// one: an incomplete write, FileSystem::ListIncomplete).
//
// Parts are numbered from 1 and joined in number order; every part but the
// highest-numbered one is at least SharedWrite::min_part_bytes, each at
// most max_part_bytes, at most max_parts of them.
struct SharedWrite {
  std::string id;  // an S3 upload id: any process may continue or abort it
  uint64_t min_part_bytes = 0;
  uint64_t max_part_bytes = 0;
  uint64_t max_parts = 0;
  // The write's own identity, which the file carries once committed (S3:
  // user metadata set when the upload starts): SharedWriteCommitted tells
  // by it whether the commit happened, whoever made it.
  std::string marker;
  // false: the commit never replaces a file at the path: AlreadyExists when
  // one is there (S3: If-None-Match: *). Set by the committing process.
  bool replace = true;
};

// What a part's upload returns, and the commit needs: its number, the
// server's tag of its bytes (an S3 ETag) and the checksum its bytes were
// sent with (S3: their CRC-32C, base64), which the commit names again.
struct SharedPart {
  uint64_t number = 0;
  std::string tag;
  std::string checksum;
};

// One process's consecutive parts of a shared write: the bytes appended
// fill parts first_part, first_part + 1, ... of the sizes given, uploaded
// several at a time while the caller goes on appending (host memory: the
// parts in flight plus the one being filled). Not thread-safe. Destroying
// it waits for the parts in flight; it never aborts the shared write (its
// owner does).
class SharedWriteRegion : public WritableFile {
 public:
  // Waits for every part: their receipts in part order. The bytes appended
  // must fill the sizes given exactly, except that the last part may be
  // short when it is the file's last (InvalidArgument otherwise).
  virtual Result<std::vector<SharedPart>> Finish() = 0;
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

  // Directories, for a writer that keeps its files in one (a manager's
  // steps). Object storage has none: there, and by default, CreateDir does
  // nothing and RemoveAll is Remove.
  //
  // Creates the directory `path` and its missing parents; OK when it is a
  // directory already, InvalidArgument when a file is there or on the way.
  virtual Status CreateDir(const std::string& path);
  // Removes the file at `path`, or the directory there with everything in
  // it (a symbolic link itself, never what it points to). NotFound when
  // nothing is there.
  virtual Status RemoveAll(const std::string& path);

  // Starts a write that replaces `path` atomically (AtomicWritableFile).
  // `expected_size` (0: unknown) sizes an object store's parts; any size
  // may then be written. The default is the temporary + Rename +
  // SyncParentDir of io/atomic_write.h over the methods above: a directory
  // at `path` is InvalidArgument and a missing parent directory NotFound,
  // before anything is created.
  virtual Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicWrite(
      const std::string& path, uint64_t expected_size = 0);

  // Every file whose path starts with `prefix` (a directory's files and
  // those of its subdirectories, when `prefix` ends in '/'), sorted by
  // path. A prefix that matches nothing gives an empty list. The default
  // walks ListDir and sizes each file by opening it.
  virtual Result<std::vector<FileInfo>> List(const std::string& prefix);

  // The incomplete writes under `prefix` (paths that start with it). The
  // default finds the temporaries of io/atomic_write.h with List.
  virtual Result<std::vector<IncompleteWrite>> ListIncomplete(const std::string& prefix);
  // Discards an incomplete write (what a crashed writer would have done).
  // InvalidArgument when its writer is alive on this machine; NotFound when
  // it is already gone.
  virtual Status AbortIncomplete(const IncompleteWrite& write);

  // Writes that never replace (create-if-absent), for a writer that must not
  // overwrite what another wrote (two jobs saving the same step):
  //
  // OpenForAtomicCreate is OpenForAtomicWrite except that Commit replaces
  // nothing: when a file exists at `path` at that moment, Commit fails with
  // AlreadyExists and the write is aborted. Locally the temporary is renamed
  // with RenameNoReplace; in S3 the upload is completed (or the object put)
  // with `If-None-Match: *`, which AWS and SeaweedFS honour; a server that
  // ignores the header replaces the object, as OpenForAtomicWrite does. The
  // default is the local temporary renamed with RenameNoReplace.
  virtual Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicCreate(
      const std::string& path, uint64_t expected_size = 0);
  // Renames `from` to `to`, atomically, unless `to` exists: AlreadyExists
  // then, and `from` stays. Unsupported by default (and in S3, which has no
  // rename).
  virtual Status RenameNoReplace(const std::string& from, const std::string& to);

  // Opens the existing file `path` for positioned writes, keeping its
  // bytes: NotFound when it is missing. Unsupported by default (object
  // storage has no writes at an offset; it shares a file through the shared
  // writes below).
  virtual Result<std::unique_ptr<PositionedWritableFile>> OpenForPositionedWrite(
      const std::string& path);

  // Shared writes (SharedWrite above). Unsupported by default: a local file
  // is shared through positioned writes to a temporary instead.
  // Starts one at `path` (S3: CreateMultipartUpload).
  virtual Result<SharedWrite> StartSharedWrite(const std::string& path);
  // This process's parts [first_part, first_part + part_bytes.size()) of
  // the write `write` to `path` (begun by any process).
  virtual Result<std::unique_ptr<SharedWriteRegion>> OpenSharedWriteRegion(
      const std::string& path, const SharedWrite& write, uint64_t first_part,
      std::vector<uint64_t> part_bytes);
  // Makes the parts, in number order, the file at `path`, replacing what was
  // there (unless write.replace is false). On failure nothing new is
  // visible; the write is not aborted. A commit whose answer was lost is
  // recognised by the write's marker: OK.
  virtual Status CommitSharedWrite(const std::string& path,
                                   const SharedWrite& write,
                                   std::span<const SharedPart> parts);
  // Whether the file at `path` is `write`, committed (by any process): for a
  // process that cannot learn the committer's outcome. Unsupported by
  // default.
  virtual Result<bool> SharedWriteCommitted(const std::string& path,
                                            const SharedWrite& write);
  // Discards the write and its parts; the previous file stays. Any process
  // may call it, as often as it likes (OK when it is already gone).
  virtual Status AbortSharedWrite(const std::string& path,
                                  const SharedWrite& write);
};

// The process-wide POSIX file system.
FileSystem& PosixFileSystem();

// The process-wide file system that picks by path: "s3://" URLs go to S3
// configured from the environment and the AWS configuration files, as the
// AWS CLI and SDKs are (docs/OBJECT_STORAGE.md); every other path to
// PosixFileSystem(). In a build without S3 support an s3:// URL is
// Unsupported, saying so. The S3 side is set up at its first use.
FileSystem& DefaultFileSystem();

// Whether `path` is an object-storage URL ("s3://...") rather than a path:
// the scheme is written in lower case, as the AWS CLI takes it. A path that
// begins with it in another case ("S3://...") is neither: the file systems
// of DefaultFileSystem() and NewS3FileSystem refuse it (InvalidArgument).
bool IsObjectStoreUrl(std::string_view path);

}  // namespace rckpt

#endif  // RCKPT_FILE_H_
