// Running reliability_child (and the CLI) as separate processes.
#ifndef RCKPT_TESTS_RELIABILITY_CHILD_PROCESS_H_
#define RCKPT_TESTS_RELIABILITY_CHILD_PROCESS_H_

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

namespace rckpt::reliability {

// A started child whose stdout is captured through a pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_fd_ = fds[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  bool started() const { return pid_ > 0; }
  void Kill() { kill(pid_, SIGKILL); }

  // Reads stdout to its end and reaps the child. Returns the wait status.
  int Wait() {
    char buf[4096];
    ssize_t n;
    while ((n = read(out_fd_, buf, sizeof buf)) > 0) out_.append(buf, n);
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return status;
  }
  const std::string& output() const { return out_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool waited_ = false;
  std::string out_;
};

// Runs to completion; returns stdout without its trailing newline.
inline std::string RunChild(const std::vector<std::string>& argv, int* wait_status = nullptr) {
  Child c(argv);
  const int status = c.Wait();
  if (wait_status) *wait_status = status;
  std::string out = c.output();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace rckpt::reliability

#endif  // RCKPT_TESTS_RELIABILITY_CHILD_PROCESS_H_
