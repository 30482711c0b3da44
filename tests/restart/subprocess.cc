#include "subprocess.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace rckpt::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string ProcessResult::Describe() const {
  std::string head = signal != 0 ? "signal " + std::to_string(signal)
                                 : "exit " + std::to_string(exit_code);
  return head + "\n--- stdout\n" + out + "--- stderr\n" + err;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& work_dir) {
  static int counter = 0;
  const std::string base = work_dir + "/proc-" + std::to_string(counter++);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  ProcessResult result;
  pid_t pid = fork();
  if (pid < 0) {
    result.err = "fork failed";
    return result;
  }
  if (pid == 0) {
    // The child crashes on purpose in many tests: no core files.
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || chdir(work_dir.c_str()) != 0) _exit(127);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

}  // namespace rckpt::testing
