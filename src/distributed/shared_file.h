// The one file every rank of a collective save writes: each rank its own
// extent, at offsets the ranks agreed on.
#ifndef RCKPT_SRC_DISTRIBUTED_SHARED_FILE_H_
#define RCKPT_SRC_DISTRIBUTED_SHARED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "rckpt/distributed.h"
#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt {

class SharedFile {
 public:
  virtual ~SharedFile() = default;
  // Writes all of `data` at `offset` (not thread-safe).
  virtual Status WriteAt(uint64_t offset, std::span<const std::byte> data) = 0;
  // Syncs this rank's writes to stable storage and closes the file.
  // Collective: every rank that opened it calls it, whatever happened
  // before (an implementation may need every rank for the sync).
  virtual Status SyncAndClose() = 0;
};

// Opens the file `path`, which rank 0 has created, for writing on every
// rank of `comm`. Every rank calls it, once the ranks agreed to go on (an
// implementation may need all of them, as MPI_File_open does); it returns
// this rank's own outcome, which the caller agrees on with its next step.
using SharedFileOpener =
    std::function<Result<std::unique_ptr<SharedFile>>(Communicator& comm, const std::string& path)>;

// Positioned writes through each rank's own handle of `fs`
// (FileSystem::OpenForPositionedWrite: pwrite and fsync on a local disk),
// synced on each rank: every rank opens the file after rank 0 created it.
// `fs` must outlive the opener.
SharedFileOpener PositionedFileOpener(FileSystem& fs);

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_SHARED_FILE_H_
