// Running a program one file-changing system call at a time, to kill it at
// an exact point: the program runs under ptrace, every thread stops at the
// entry of every system call, and the ones that change files (writes to
// regular files, syncs, renames, removals, opens that create or truncate) are
// counted. Killed at step k, the program has made exactly k such calls and
// never makes the (k+1)-th: a fatal signal at a syscall-entry stop aborts
// the call. No clocks are involved.
#ifndef RCKPT_TESTS_RELIABILITY_SYSCALL_STEPS_H_
#define RCKPT_TESTS_RELIABILITY_SYSCALL_STEPS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace rckpt::reliability {

struct SteppedRun {
  std::string error;   // why the program could not be traced; empty when it was
  int steps = 0;       // file-changing calls made (entered) before the end
  int wait_status = 0; // of the program's main thread
};

namespace syscall_steps_internal {

// Whether thread `tid`'s descriptor `fd` is a regular file. Writes to
// pipes, sockets and terminals change no file, and their number need not be
// the same from run to run: the sanitizers' runtime probes memory by writing
// it to a pipe, as often as its threads happen to need. A descriptor that
// cannot be looked at counts as a file (the call would fail anyway).
inline bool WritesTo(pid_t tid, uint64_t fd) {
  struct stat st {};
  const std::string link = "/proc/" + std::to_string(tid) + "/fd/" + std::to_string(fd);
  return ::stat(link.c_str(), &st) != 0 || S_ISREG(st.st_mode);
}

inline bool OpenChangesFiles(uint64_t flags) {
  return (flags & (O_CREAT | O_TRUNC)) != 0 || (flags & O_ACCMODE) != O_RDONLY;
}

// Whether the system call `nr` with `args` changes a file.
inline bool ChangesFiles(pid_t tid, uint64_t nr, const uint64_t* args) {
  switch (nr) {
    case SYS_write:
    case SYS_writev:
    case SYS_pwrite64:
    case SYS_pwritev:
#ifdef SYS_pwritev2
    case SYS_pwritev2:
#endif
      return WritesTo(tid, args[0]);
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_sync_file_range:
    case SYS_ftruncate:
    case SYS_fallocate:
    case SYS_msync:
    case SYS_unlinkat:
#ifdef SYS_copy_file_range
    case SYS_copy_file_range:
#endif
#ifdef SYS_renameat  // not on every architecture (aarch64 has renameat2 only)
    case SYS_renameat:
#endif
#ifdef SYS_renameat2
    case SYS_renameat2:
#endif
      return true;
    case SYS_openat:
      return OpenChangesFiles(args[2]);
#ifdef SYS_rename
    case SYS_rename:
    case SYS_unlink:
    case SYS_creat:
    case SYS_truncate:
      return true;
    case SYS_open:
      return OpenChangesFiles(args[1]);
#endif
    default:
      return false;
  }
}

}  // namespace syscall_steps_internal

// Runs `argv` (stdout and stderr to /dev/null) and kills it with SIGKILL at
// the entry of its `kill_at`-th file-changing system call (0-based; -1:
// never). Returns how many such calls it entered and how it ended, or why it
// could not be traced.
inline SteppedRun RunKillingAtStep(const std::vector<std::string>& argv, int kill_at) {
  namespace in = syscall_steps_internal;
  SteppedRun run;
  // Leak checking at exit attaches to the process's threads with ptrace,
  // which a traced process cannot allow; the environment is built before
  // fork so the child only calls async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "ASAN_OPTIONS=", 13) != 0) env_strings.push_back(*e);
  }
  const char* asan = std::getenv("ASAN_OPTIONS");
  env_strings.push_back(std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
                        "detect_leaks=0");
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    run.error = std::string("fork: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) _exit(126);
    raise(SIGSTOP);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
    run.error = "the child did not stop for tracing (ptrace(PTRACE_TRACEME) refused?), wait "
                "status " + std::to_string(status);
    run.wait_status = status;
    return run;
  }
  if (ptrace(PTRACE_SETOPTIONS, pid, nullptr,
             PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
                 PTRACE_O_EXITKILL) != 0 ||
      ptrace(PTRACE_SYSCALL, pid, nullptr, nullptr) != 0) {
    run.error = std::string("ptrace: ") + std::strerror(errno);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return run;
  }
  bool killed = false;
  for (;;) {
    const pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) break;  // no traced thread left
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (tid == pid) run.wait_status = status;
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    int inject = 0;
    const int sig = WSTOPSIG(status);
    if (sig == (SIGTRAP | 0x80)) {
      __ptrace_syscall_info info{};
      if (!killed &&
          ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof info, &info) > 0 &&
          info.op == PTRACE_SYSCALL_INFO_ENTRY &&
          in::ChangesFiles(tid, info.entry.nr, reinterpret_cast<const uint64_t*>(info.entry.args))) {
        if (run.steps == kill_at) {
          kill(pid, SIGKILL);  // the call this thread stopped at is not made
          killed = true;
        }
        ++run.steps;
      }
    } else if ((status >> 16) != 0 || sig == SIGSTOP) {
      // A ptrace event (clone, exec) or a new thread's first stop.
    } else {
      inject = sig;  // the program's own signal
    }
    ptrace(PTRACE_SYSCALL, tid, nullptr, inject);
  }
  return run;
}

}  // namespace rckpt::reliability

#endif  // RCKPT_TESTS_RELIABILITY_SYSCALL_STEPS_H_
