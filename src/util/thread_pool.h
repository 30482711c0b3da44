// A fixed pool of worker threads running submitted tasks in FIFO order. The
// threads themselves are the process's: a pool borrows idle ones (making
// them only when too few are idle) and gives them back when it is
// destroyed, so a call that makes a pool of N threads on every load or save
// starts no thread once the process has run as many at once before.
#ifndef RCKPT_SRC_UTIL_THREAD_POOL_H_
#define RCKPT_SRC_UTIL_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rckpt {

// Number of threads for a `threads` option: the value itself when > 0,
// otherwise what fits this process on its node (DefaultThreads in
// util/node.h: its CPUs, its cgroup's quota, shared with the job's other
// processes on the node).
int ResolveThreads(int threads);

// How many of the process's worker threads exist now, and how many of them
// are idle (not lent to a pool).
struct WorkerThreadStats {
  int threads = 0;
  int idle = 0;
};
WorkerThreadStats ProcessWorkerThreads();

// Thread-safety: Submit and ParallelFor may be called from any thread,
// including from tasks running on the pool.
class ThreadPool {
 public:
  // Starts `threads` workers (none when threads <= 0: Submit then runs each
  // task on the caller, ParallelFor runs everything on the caller).
  explicit ThreadPool(int threads);
  ~ThreadPool();  // waits for queued tasks, then gives its threads back
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  int size() const { return workers_; }

  // Runs fn(i) for i in [0, n) on the pool and the calling thread; returns
  // when all are done. Each index runs exactly once. The caller takes part,
  // so this completes even when every worker is busy (or is the caller).
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

 private:
  void Work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  int workers_ = 0;
  int working_ = 0;  // lent threads not yet back among the idle
  std::condition_variable done_cv_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_THREAD_POOL_H_
