#include "util/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "test_util.h"
#include "util/node.h"

namespace rckpt {
namespace {

TEST(ResolveThreadsTest, PositiveIsKeptOtherwiseWhatFitsTheNode) {
  EXPECT_EQ(ResolveThreads(3), 3);
  EXPECT_EQ(ResolveThreads(0), DefaultThreads());
  EXPECT_EQ(ResolveThreads(-2), DefaultThreads());
  EXPECT_GE(DefaultThreads(), 1);
}

TEST(ThreadPoolTest, PoolsReuseTheProcesssThreads) {
  { ThreadPool warm(6); }
  const WorkerThreadStats before = ProcessWorkerThreads();
  EXPECT_GE(before.idle, 6);
  for (int call = 0; call < 20; ++call) {
    ThreadPool pool(6);
    std::atomic<int> ran{0};
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ran.fetch_add(1); });
    pool.ParallelFor(10, [&](size_t) { ran.fetch_add(1); });
  }
  EXPECT_EQ(ProcessWorkerThreads().threads, before.threads)
      << "twenty pools of six started no thread";
}

TEST(ThreadPoolTest, TwoPoolsAtOnceGetThreadsOfTheirOwn) {
  ThreadPool a(3);
  ThreadPool b(3);
  std::atomic<int> inside{0};
  // Each of the six tasks waits until all six run at once: only six
  // distinct threads can get there.
  auto task = [&] {
    inside.fetch_add(1);
    while (inside.load() < 6) std::this_thread::yield();
  };
  for (int i = 0; i < 3; ++i) {
    a.Submit(task);
    b.Submit(task);
  }
}

TEST(ThreadPoolTest, RunsEverySubmittedTaskBeforeDestruction) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3);
    EXPECT_EQ(pool.size(), 3);
    for (int i = 0; i < 1000; ++i) pool.Submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ThreadPoolTest, TasksRunOnWorkerThreads) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  {
    ThreadPool pool(2);
    for (int i = 0; i < 100; ++i) {
      pool.Submit([&] {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      });
    }
  }
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_GE(ids.size(), 1u);
  EXPECT_LE(ids.size(), 2u);
}

TEST(ThreadPoolTest, PoolWithoutWorkersRunsTasksOnCaller) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 0);
  std::thread::id ran_on;
  pool.Submit([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

class ParallelForTest : public ::testing::TestWithParam<int> {};

TEST_P(ParallelForTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(GetParam());
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{10000}}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].load(), 1) << "n " << n << " index " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, ParallelForTest, ::testing::Values(0, 1, 4));

TEST(ThreadPoolTest, NestedParallelForCompletesWhenWorkersAreBusy) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.ParallelFor(8, [&](size_t) {
    pool.ParallelFor(8, [&](size_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 64);
}

TEST(ThreadPoolTest, ParallelForUsesMoreThanOneThread) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Every index waits until four have started, which needs four threads.
  pool.ParallelFor(4, [&](size_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    while (arrived.load() < 4) std::this_thread::yield();
  });
  EXPECT_EQ(ids.size(), 4u);
}

}  // namespace
}  // namespace rckpt
