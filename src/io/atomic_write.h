// Atomic file replacement, the one way rckpt writes a file: the bytes go to
// a temporary in the destination's directory, are synced, and the temporary
// is renamed over the destination, whose directory is then synced. A crash
// or an error at any point leaves a previous file at the destination
// intact; a failed write removes its temporary, and the next write to the
// same path removes temporaries that crashed processes left behind.
// Save, the exporters and the collective save all write this way.
#ifndef RCKPT_SRC_IO_ATOMIC_WRITE_H_
#define RCKPT_SRC_IO_ATOMIC_WRITE_H_

#include <functional>
#include <memory>
#include <string>

#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

// The temporary that becomes `path` once complete. Created by the writing
// process (or, for a collective save, by rank 0, which names it for every
// rank); not thread-safe.
class AtomicFile {
 public:
  // Removes stale temporaries of `path` and names this write's temporary.
  AtomicFile(FileSystem& fs, std::string path);
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
  bool committed_ = false;
};

// Writes `path` atomically with `write`, which appends the whole content to
// the file it is given: open, write, sync, close, commit. The first error is
// returned (the previous file at `path` untouched, the temporary removed).
Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                           const std::function<Status(WritableFile&)>& write);

// "<path>.tmp-<pid>-<16 random hex digits>".
std::string TempPathFor(const std::string& path);

// Removes "<path>.tmp-<pid>-*" files in path's directory whose <pid> is not
// a live process (leftovers of crashed saves). Best effort; never fails.
void RemoveStaleTemps(FileSystem& fs, const std::string& path);

// fs.Remove(path), except that a missing file is OK. Used to clean up a
// temporary that may or may not have been created.
Status RemoveIfExists(FileSystem& fs, const std::string& path);

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_ATOMIC_WRITE_H_
