// Atomic whole-file writes for the exporters, as rckpt::Save does them: a
// temporary file in the same directory, fsync, rename over the path, fsync of
// the directory; on any failure the temporary is removed and a previous file
// at the path is left untouched.
#ifndef RCKPT_SRC_CONVERT_ATOMIC_WRITE_H_
#define RCKPT_SRC_CONVERT_ATOMIC_WRITE_H_

#include <functional>
#include <string>

#include "rckpt/file.h"
#include "rckpt/status.h"

namespace rckpt::convert {

Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                           const std::function<Status(WritableFile*)>& write);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_ATOMIC_WRITE_H_
