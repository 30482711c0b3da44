// Runs a program as a child process and collects what it did.
#ifndef RCKPT_TESTS_RESTART_SUBPROCESS_H_
#define RCKPT_TESTS_RESTART_SUBPROCESS_H_

#include <string>
#include <vector>

namespace rckpt::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, 0 if it exited
  std::string out;     // everything it wrote to stdout
  std::string err;     // and to stderr

  // "exit 3" / "signal 6", then both streams, for failure messages.
  std::string Describe() const;
};

// Runs `argv[0]` with `argv` in `work_dir` (stdout and stderr go to files
// there), without core dumps, and waits for it.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& work_dir);

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_RESTART_SUBPROCESS_H_
