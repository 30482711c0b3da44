// Compares two checkpoint files through the library: everything a restart
// depends on, as `rckpt diff` does (docs/CLI.md).
#ifndef RCKPT_TESTS_RESTART_CHECKPOINT_COMPARE_H_
#define RCKPT_TESTS_RESTART_CHECKPOINT_COMPARE_H_

#include <map>
#include <string>
#include <vector>

#include "rckpt/device.h"
#include "rckpt/status.h"

namespace rckpt::testing {

// Every difference between the checkpoints at `a` and `b`, one line each
// (empty: identical): sections and roles, tensor names, sections, roles,
// dtypes, shapes and bytes, origin devices (unless `ignore_devices`), RNG
// records (kind, bytes, origin), the state tree and the user metadata.
// Both files are loaded to host memory. An error if either cannot be read.
Result<std::vector<std::string>> CompareCheckpoints(const std::string& a,
                                                    const std::string& b,
                                                    bool ignore_devices);

// The origin device of every tensor and RNG record of the file, by name.
Result<std::map<std::string, Device>> OriginDevices(const std::string& path);

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_RESTART_CHECKPOINT_COMPARE_H_
