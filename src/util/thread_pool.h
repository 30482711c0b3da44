// A fixed pool of worker threads running submitted tasks in FIFO order.
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
// otherwise the number of cores (at least 1).
int ResolveThreads(int threads);

// Thread-safety: Submit and ParallelFor may be called from any thread,
// including from tasks running on the pool.
class ThreadPool {
 public:
  // Starts `threads` workers (none when threads <= 0: Submit then runs each
  // task on the caller, ParallelFor runs everything on the caller).
  explicit ThreadPool(int threads);
  ~ThreadPool();  // waits for queued tasks, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  int size() const { return static_cast<int>(workers_.size()); }

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
  std::vector<std::thread> workers_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_THREAD_POOL_H_
