#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace rckpt {

int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

ThreadPool::ThreadPool(int threads) {
  const int n = std::max(threads, 0);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  if (workers_.empty()) {
    task();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      // Queued tasks are drained before stopping: the destructor promises
      // that everything submitted runs.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  // Shared with the helper tasks, which may start only after the loop is
  // over; they then find no index left and never touch `fn`.
  struct Loop {
    std::atomic<size_t> next{0};
    size_t n = 0;
    const std::function<void(size_t)>* fn = nullptr;
    std::mutex mu;
    std::condition_variable cv;
    size_t done = 0;
  };
  auto loop = std::make_shared<Loop>();
  loop->n = n;
  loop->fn = &fn;
  auto drain = [](Loop& l) {
    size_t finished = 0;
    for (size_t i; (i = l.next.fetch_add(1, std::memory_order_relaxed)) < l.n;
         ++finished) {
      (*l.fn)(i);
    }
    if (finished == 0) return;
    std::lock_guard<std::mutex> lock(l.mu);
    l.done += finished;
    if (l.done == l.n) l.cv.notify_all();
  };
  const size_t helpers = std::min(workers_.size(), n - 1);
  for (size_t h = 0; h < helpers; ++h) {
    Submit([loop, drain] { drain(*loop); });
  }
  drain(*loop);
  std::unique_lock<std::mutex> lock(loop->mu);
  loop->cv.wait(lock, [&] { return loop->done == loop->n; });
}

}  // namespace rckpt
