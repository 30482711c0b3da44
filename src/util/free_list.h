// Work space that threads borrow and give back, so a load, save or verify
// makes as many buffers as it ever uses at once, not one per chunk.
#ifndef RCKPT_SRC_UTIL_FREE_LIST_H_
#define RCKPT_SRC_UTIL_FREE_LIST_H_

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace rckpt {

// Thread-safe. Objects are default-constructed when none is free and are
// destroyed with the list (or when a borrower drops them).
template <typename T>
class FreeList {
 public:
  std::unique_ptr<T> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return std::make_unique<T>();
    std::unique_ptr<T> t = std::move(free_.back());
    free_.pop_back();
    return t;
  }
  void Give(std::unique_ptr<T> t) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(t));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> free_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_FREE_LIST_H_
