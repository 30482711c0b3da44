// Atomic file replacement, the one way rckpt writes a file: the bytes go to
// a temporary in the destination's directory, are synced, and the temporary
// is renamed over the destination, whose directory is then synced. A crash
// or an error at any point leaves a previous file at the destination
// intact; a failed write removes its temporary, and the next write to the
// same path removes temporaries that crashed processes left behind.
// Save, the exporters and the collective save all write this way.
#ifndef RCKPT_SRC_IO_ATOMIC_WRITE_H_
#define RCKPT_SRC_IO_ATOMIC_WRITE_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

// The temporary that becomes `path` once complete. Created by the writing
// process (or, for a collective save, by rank 0, which names it for every
// rank); not thread-safe.
class AtomicFile {
 public:
  // Removes stale temporaries of `path` and names this write's temporary.
  // With `replace` false, Commit renames with FileSystem::RenameNoReplace
  // (AlreadyExists when `path` exists then).
  AtomicFile(FileSystem& fs, std::string path, bool replace = true);
  // Removes the temporary unless Commit succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

  // Creates the temporary for writing (errors of FileSystem::OpenForWrite).
  Result<std::unique_ptr<WritableFile>> Open();

  // Renames the temporary (complete, synced and closed by the caller) over
  // path() and syncs path()'s directory. IoError from either.
  Status Commit();

 private:
  FileSystem& fs_;
  std::string path_;
  std::string temp_;
  bool replace_ = true;
  bool committed_ = false;
};

// The AtomicWritableFile of a local file system (FileSystem's default
// OpenForAtomicWrite): an AtomicFile and its open temporary. Every error
// names `path`, never the temporary.
// With `replace` false, FileSystem::OpenForAtomicCreate's default: Commit
// never replaces a file at `path` (AlreadyExists).
Result<std::unique_ptr<AtomicWritableFile>> OpenLocalAtomicFile(FileSystem& fs,
                                                                const std::string& path,
                                                                bool replace = true);

// Writes `path` atomically with `write`, which appends the whole content to
// the file it is given: fs.OpenForAtomicWrite, write, Commit (locally: sync,
// close, rename, directory sync; in S3: the multipart upload completed).
// The first error is returned, the write aborted (the previous file at
// `path` untouched, the temporary removed). `expected_size` (0: unknown) is
// passed on to size an object store's parts. With `replace` false the write
// never replaces a file at `path` (fs.OpenForAtomicCreate: AlreadyExists).
Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                           const std::function<Status(WritableFile&)>& write,
                           uint64_t expected_size = 0, bool replace = true);

// "<path>.tmp-<pid>-<16 random hex digits>".
std::string TempPathFor(const std::string& path);

// Splits a name made by TempPathFor into the path it was for and the pid
// that made it; false for any other name.
bool ParseTempPath(std::string_view temp, std::string* path, pid_t* pid);

// Whether no process `pid` runs here (or it is a zombie, which never
// writes again).
bool ProcessIsDead(pid_t pid);

// Removes "<path>.tmp-<pid>-*" files in path's directory whose <pid> is not
// a live process (leftovers of crashed saves). Best effort; never fails.
void RemoveStaleTemps(FileSystem& fs, const std::string& path);

// fs.Remove(path), except that a missing file is OK. Used to clean up a
// temporary that may or may not have been created.
Status RemoveIfExists(FileSystem& fs, const std::string& path);

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_ATOMIC_WRITE_H_
