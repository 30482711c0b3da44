// Ranks as threads of one process, joined by an in-process communicator:
// collective saves and loads tested without MPI or torch. Header-only.
#ifndef RCKPT_TESTS_DISTRIBUTED_THREAD_COMMUNICATOR_H_
#define RCKPT_TESTS_DISTRIBUTED_THREAD_COMMUNICATOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rckpt/distributed.h"

namespace rckpt::testing {

// Threads that meet at every collective: each deposits its bytes, the last
// to come completes the round, every one takes all the bytes. A rank that
// does not come within `timeout` makes the others fail the collective.
class ThreadGroup {
 public:
  ThreadGroup(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout) {}

  Result<std::vector<std::string>> Exchange(int rank, std::string_view bytes) {
    std::unique_lock lock(mu_);
    if (broken_)
      return Status::IoError("rank " + std::to_string(rank) +
                             ": group is broken");
    const uint64_t round = round_;
    if (pending_.empty()) pending_.resize(size_);
    pending_[rank] = std::string(bytes);
    if (++arrived_ == size_) {
      done_ = std::move(pending_);
      pending_.clear();
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return done_;
    }
    if (!cv_.wait_for(lock, timeout_,
                      [&] { return round_ != round || broken_; }) ||
        broken_) {
      broken_ = true;
      cv_.notify_all();
      return Status::IoError("rank " + std::to_string(rank) +
                             ": allgather timed out");
    }
    return done_;
  }

  int size() const { return size_; }

  // Ends the group as a rank's death ends a real one: every rank waiting in
  // a collective, and every later one, fails at once.
  void Break() {
    std::lock_guard lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> pending_, done_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  bool broken_ = false;
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank)
      : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  Result<std::vector<std::string>> AllGather(std::string_view bytes) override {
    ++collectives_;
    return group_.Exchange(rank_, bytes);
  }
  Result<std::string> Broadcast(int root, std::string_view bytes) override {
    RCKPT_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(bytes));
    return all[root];
  }
  int collectives() const { return collectives_; }

 private:
  ThreadGroup& group_;
  int rank_;
  int collectives_ = 0;
};

// Runs fn(comm) on `size` threads, one rank each; their results by rank.
template <typename T>
std::vector<T> OnRanks(
    int size, const std::function<T(Communicator&)>& fn,
    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  ThreadGroup group(size, timeout);
  std::vector<std::optional<T>> results(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      results[r].emplace(fn(comm));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<T> out;
  for (std::optional<T>& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_DISTRIBUTED_THREAD_COMMUNICATOR_H_
