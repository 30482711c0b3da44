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

// A started child whose stdout is captured through a pipe; with
// `pipe_stdin`, its stdin is a pipe the parent writes to (Send).
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, bool pipe_stdin = false) {
    int fds[2];
    if (pipe(fds) != 0) return;
    int in[2] = {-1, -1};
    // A child that died early makes Send fail instead of killing the test.
    if (pipe_stdin) signal(SIGPIPE, SIG_IGN);
    if (pipe_stdin && pipe(in) != 0) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    if (pipe_stdin) {
      posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
      posix_spawn_file_actions_addclose(&actions, in[0]);
      posix_spawn_file_actions_addclose(&actions, in[1]);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_fd_ = fds[0];
    if (pipe_stdin) {
      close(in[0]);
      in_fd_ = in[1];
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (in_fd_ >= 0) close(in_fd_);
  }

  bool started() const { return pid_ > 0; }
  void Kill() { kill(pid_, SIGKILL); }

  // The next line of stdout without its newline; false at end of output
  // (the child exited or closed stdout).
  bool ReadLine(std::string* line) {
    size_t nl;
    while ((nl = pending_.find('\n')) == std::string::npos) {
      char buf[4096];
      const ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return false;
      pending_.append(buf, n);
    }
    *line = pending_.substr(0, nl);
    pending_.erase(0, nl + 1);
    return true;
  }

  // Writes one byte to the child's stdin (Child(argv, true)).
  bool Send() {
    const char go = 'g';
    return in_fd_ >= 0 && write(in_fd_, &go, 1) == 1;
  }

  // Reads stdout to its end and reaps the child. Returns the wait status.
  int Wait() {
    if (in_fd_ >= 0) {
      close(in_fd_);
      in_fd_ = -1;
    }
    out_ = pending_;
    pending_.clear();
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
  int in_fd_ = -1;
  bool waited_ = false;
  std::string out_;
  std::string pending_;  // read by ReadLine, not yet returned
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
