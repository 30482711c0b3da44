#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include <pthread.h>

#include "util/node.h"

namespace rckpt {

namespace {

// The process's worker threads. Each parks on its own condition variable
// until a pool lends it a job (the pool's Work loop), runs it, and parks
// again. They live as long as the process (never joined: exit ends them).
class WorkerThreads {
 public:
  // Runs `job` on an idle thread, or a new one when none is idle, then
  // `parked` once the thread is idle again (so a pool that waits for it
  // finds its threads idle for the next pool).
  void Lend(std::function<void()> job, std::function<void()> parked) {
    Parked* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        p = idle_.back();
        idle_.pop_back();
      }
    }
    if (p == nullptr) {
      p = new Parked;  // owned by its thread, which never ends
      std::thread(&WorkerThreads::Park, this, p).detach();
      std::lock_guard<std::mutex> lock(mu_);
      ++threads_;
    }
    {
      std::lock_guard<std::mutex> lock(p->mu);
      p->job = std::move(job);
      p->parked = std::move(parked);
    }
    p->cv.notify_one();
  }

  WorkerThreadStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {threads_, static_cast<int>(idle_.size())};
  }

  // The process's; made anew in a child after fork, which has none of the
  // parent's threads (the old set is left as it was: its locks may be held).
  static WorkerThreads& Get() { return *Instance().load(); }

 private:
  struct Parked {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> job;
    std::function<void()> parked;
  };

  void Park(Parked* p) {
    for (;;) {
      std::function<void()> job, parked;
      {
        std::unique_lock<std::mutex> lock(p->mu);
        p->cv.wait(lock, [p] { return p->job != nullptr; });
        job = std::move(p->job);
        parked = std::move(p->parked);
        p->job = nullptr;
      }
      job();
      {
        std::lock_guard<std::mutex> lock(mu_);
        idle_.push_back(p);
      }
      parked();  // its last touch of the pool, which may be gone right after
    }
  }

  static std::atomic<WorkerThreads*>& Instance() {
    static std::atomic<WorkerThreads*> instance{[] {
      pthread_atfork(nullptr, nullptr, [] {
        auto* fresh = new WorkerThreads;
        fresh->before_ = Instance().load();  // kept reachable, never touched
        Instance().store(fresh);
      });
      return new WorkerThreads;
    }()};
    return instance;
  }

  std::mutex mu_;
  std::vector<Parked*> idle_;
  int threads_ = 0;
  WorkerThreads* before_ = nullptr;  // the parent's set, in a forked child
};

}  // namespace

int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  return DefaultThreads();
}

WorkerThreadStats ProcessWorkerThreads() { return WorkerThreads::Get().Stats(); }

ThreadPool::ThreadPool(int threads) : workers_(std::max(threads, 0)), working_(workers_) {
  for (int i = 0; i < workers_; ++i) {
    WorkerThreads::Get().Lend([this] { Work(); }, [this] {
      std::lock_guard<std::mutex> lock(mu_);
      if (--working_ == 0) done_cv_.notify_all();
    });
  }
}

ThreadPool::~ThreadPool() {
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
  done_cv_.wait(lock, [this] { return working_ == 0; });
}

void ThreadPool::Submit(std::function<void()> task) {
  if (workers_ == 0) {
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
      if (queue_.empty()) return;  // the thread goes back to the process's set
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
  const size_t helpers = std::min(static_cast<size_t>(workers_), n - 1);
  for (size_t h = 0; h < helpers; ++h) {
    Submit([loop, drain] { drain(*loop); });
  }
  drain(*loop);
  std::unique_lock<std::mutex> lock(loop->mu);
  loop->cv.wait(lock, [&] { return loop->done == loop->n; });
}

}  // namespace rckpt
