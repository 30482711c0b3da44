// Temporary-file naming for atomic saves.
#ifndef RCKPT_SRC_IO_ATOMIC_PATH_H_
#define RCKPT_SRC_IO_ATOMIC_PATH_H_

#include <string>

#include "rckpt/file.h"

namespace rckpt {

// "<path>.tmp-<pid>-<16 random hex digits>".
std::string TempPathFor(const std::string& path);

// Removes "<path>.tmp-<pid>-*" files in path's directory whose <pid> is not
// a live process (leftovers of crashed saves). Best effort; never fails.
void RemoveStaleTemps(FileSystem& fs, const std::string& path);

// fs.Remove(path), except that a missing file is OK. Used to clean up a
// temporary that may or may not have been created.
Status RemoveIfExists(FileSystem& fs, const std::string& path);

}  // namespace rckpt

#endif  // RCKPT_SRC_IO_ATOMIC_PATH_H_
