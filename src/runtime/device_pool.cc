#include "runtime/device_pool.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <cstdlib>
#include <string>

namespace rckpt {
namespace {

// Pinned blocks are allocated in whole granules, so that calls asking for
// slightly different sizes share them.
constexpr uint64_t kGranule = 64 << 10;
constexpr uint64_t kHostAlign = 4096;

uint64_t RoundUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

DevicePoolStats DeviceRuntime::PoolStats() {
  DevicePool* p = pool();
  return p != nullptr ? p->Stats() : DevicePoolStats{};
}

void DeviceRuntime::ReleasePool() {
  if (DevicePool* p = pool()) p->Release();
}

bool DeviceRuntime::DeviceSettled(Device /*device*/) { return true; }

DevicePool::Lease& DevicePool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Return();
    pool_ = other.pool_;
    item_ = other.item_;
    other.pool_ = nullptr;
  }
  return *this;
}

void DevicePool::Lease::Return() {
  if (pool_ == nullptr) return;
  DevicePool* pool = pool_;
  pool_ = nullptr;
  pool->Give(item_);
}

DevicePool::DevicePool(DeviceRuntime& runtime, uint64_t pinned_cap)
    : runtime_(runtime), cap_(pinned_cap), pid_(getpid()) {
  stats_.pinned_cap = pinned_cap;
}

DevicePool::~DevicePool() {
  Release();
  // What no settled device let go of stays allocated for good: a copy may
  // still use it, and dropping a retired lease would return it to this
  // pool, which is going.
  std::lock_guard<std::mutex> lock(mu_);
  if (retired_.empty()) return;
  static std::mutex kept_mu;
  static auto* const kept = new std::vector<std::shared_ptr<void>>();  // never destroyed
  std::lock_guard<std::mutex> kept_lock(kept_mu);
  for (Retired& r : retired_) kept->push_back(std::move(r.keep));
  retired_.clear();
}

uint64_t DevicePool::pinned_cap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cap_;
}

void DevicePool::set_pinned_cap(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  cap_ = bytes;
  stats_.pinned_cap = bytes;
}

uint64_t DevicePool::device_resets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resets_;
}

DevicePoolStats DevicePool::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  ForgetIfForkedLocked();
  return stats_;
}

void DevicePool::set_validator(Validator v) {
  std::lock_guard<std::mutex> lock(mu_);
  validator_ = std::move(v);
}

template <typename Pick>
std::optional<DevicePool::Item> DevicePool::TakeIdle(Pick pick) {
  while (true) {
    Item found;
    Validator validator;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ForgetIfForkedLocked();
      auto it = pick(idle_);
      if (it == idle_.end()) return std::nullopt;
      found = *it;
      idle_.erase(it);
      validator = validator_;
    }
    if (!validator || validator(found.kind, found.device, found.handle)) return found;
    // Gone behind the pool's back (a device reset): so is everything else it
    // held of that device.
    ForgetDevice(found.device);
    std::lock_guard<std::mutex> lock(mu_);
    CountLocked(found, -1);
  }
}

void DevicePool::CountLocked(const Item& item, int sign) {
  auto add = [sign](uint64_t& total, uint64_t n) { total = sign > 0 ? total + n : total - n; };
  switch (item.kind) {
    case Kind::kPinned: add(stats_.pinned_bytes, item.bytes); break;
    case Kind::kScratch: add(stats_.device_scratch_bytes, item.bytes); break;
    case Kind::kStream: stats_.streams += sign; break;
  }
}

void DevicePool::ForgetIfForkedLocked() {
  const pid_t now = getpid();
  if (now == pid_) return;
  // The parent's pinned blocks are plain copy-on-write pages here, its
  // streams and device memory handles of a context this process cannot use:
  // none is freed, none reused.
  idle_.clear();
  // Retired memory stays held, never settled here (Release keeps the
  // parent's): dropping it would free the parent's memory through a
  // context this process cannot use.
  stats_.pinned_bytes = 0;
  stats_.device_scratch_bytes = 0;
  stats_.streams = 0;
  stats_.retired = 0;
  stats_.retired_bytes = 0;
  ++generation_;
  pid_ = now;
}

bool DevicePool::StaleLocked(const Item& item) const {
  auto it = epochs_.find(item.device);
  const uint64_t epoch = it == epochs_.end() ? 0 : it->second;
  return item.generation != generation_ || item.epoch != epoch;
}

DevicePool::Lease DevicePool::Make(Item item) {
  Lease lease;
  lease.pool_ = this;
  lease.item_ = item;
  return lease;
}

void DevicePool::Free(const Item& item) {
  if (!item.pooled) {
    std::free(item.handle);
    return;
  }
  switch (item.kind) {
    case Kind::kPinned: runtime_.FreePinned(item.handle); break;
    case Kind::kScratch: runtime_.Free(item.device, item.handle); break;
    case Kind::kStream: runtime_.DestroyStream(item.device, Stream{item.handle}); break;
  }
}

void DevicePool::Give(Item item) {
  if (!item.pooled) {
    Free(item);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (item.pid != getpid()) return;  // the parent's, in a forked child
    if (!StaleLocked(item)) {
      idle_.push_back(item);
      return;
    }
    // Counted as held until now; a reset device already freed it.
    CountLocked(item, -1);
    if (item.epoch != epochs_[item.device]) return;
  }
  Free(item);
}

Result<DevicePool::Lease> DevicePool::LeasePinned(Device device, uint64_t bytes) {
  const uint64_t size = RoundUp(std::max<uint64_t>(bytes, 1), kGranule);
  std::optional<Item> idle = TakeIdle([size](std::vector<Item>& items) {
    auto best = items.end();
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (it->kind == Kind::kPinned && it->bytes >= size &&
          (best == items.end() || it->bytes < best->bytes)) {
        best = it;
      }
    }
    return best;
  });
  if (idle) return Make(*idle);
  std::vector<Item> doomed;
  Item item{Kind::kPinned, device};
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Growing past the cap: idle blocks (too small for this call) go first,
    // when that makes room; when leased blocks alone fill the cap, nothing
    // is freed and the call gets unpinned memory.
    uint64_t idle_pinned = 0;
    for (const Item& i : idle_) idle_pinned += i.kind == Kind::kPinned ? i.bytes : 0;
    const bool room = stats_.pinned_bytes - idle_pinned + size <= cap_;
    while (room && stats_.pinned_bytes + size > cap_) {
      auto smallest = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if (it->kind == Kind::kPinned && (smallest == idle_.end() || it->bytes < smallest->bytes)) {
          smallest = it;
        }
      }
      if (smallest == idle_.end()) break;
      doomed.push_back(*smallest);
      CountLocked(*smallest, -1);
      idle_.erase(smallest);
    }
    item.generation = generation_;
    item.epoch = epochs_[device];
    item.pid = pid_;
    item.bytes = size;
    if (stats_.pinned_bytes + size > cap_) {
      item.pooled = false;
      ++stats_.unpinned_leases;
    } else {
      CountLocked(item, +1);  // reserved while it is allocated
    }
  }
  for (const Item& d : doomed) Free(d);
  if (!item.pooled) {
    item.handle = std::aligned_alloc(kHostAlign, RoundUp(size, kHostAlign));
    if (item.handle == nullptr) {
      return Status::OutOfMemory("pinned pool: " + std::to_string(size) +
                                 " bytes of host memory past the cap");
    }
    return Make(item);
  }
  Result<void*> p = runtime_.AllocatePinned(device, size);
  std::lock_guard<std::mutex> lock(mu_);
  if (!p.ok()) {
    CountLocked(item, -1);
    return p.status();
  }
  ++stats_.pinned_allocations;
  item.handle = *p;
  return Make(item);
}

Result<DevicePool::Lease> DevicePool::LeaseScratch(Device device, uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(bytes, 1);
  std::optional<Item> idle = TakeIdle([size, device](std::vector<Item>& items) {
    auto best = items.end();
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (it->kind == Kind::kScratch && it->device == device && it->bytes >= size &&
          (best == items.end() || it->bytes < best->bytes)) {
        best = it;
      }
    }
    return best;
  });
  if (idle) return Make(*idle);
  std::vector<Item> doomed;
  Item item{Kind::kScratch, device};
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A larger buffer replaces the idle smaller ones of this device.
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (it->kind == Kind::kScratch && it->device == device) {
        doomed.push_back(*it);
        CountLocked(*it, -1);
        it = idle_.erase(it);
      } else {
        ++it;
      }
    }
    item.generation = generation_;
    item.epoch = epochs_[device];
    item.pid = pid_;
    item.bytes = size;
  }
  for (const Item& d : doomed) Free(d);
  Result<void*> p = runtime_.Allocate(device, size);
  if (!p.ok()) return p.status();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.device_allocations;
  item.handle = *p;
  CountLocked(item, +1);
  return Make(item);
}

Result<DevicePool::Lease> DevicePool::LeaseStream(Device device) {
  std::optional<Item> idle = TakeIdle([device](std::vector<Item>& items) {
    return std::find_if(items.begin(), items.end(), [device](const Item& i) {
      return i.kind == Kind::kStream && i.device == device;
    });
  });
  if (idle) return Make(*idle);
  Item item{Kind::kStream, device};
  {
    std::lock_guard<std::mutex> lock(mu_);
    item.generation = generation_;
    item.epoch = epochs_[device];
    item.pid = pid_;
  }
  Result<Stream> s = runtime_.CreateStream(device);
  if (!s.ok()) return s.status();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.streams_created;
  item.handle = s->handle;
  CountLocked(item, +1);
  return Make(item);
}

void DevicePool::Retire(Lease lease) {
  if (!lease) return;
  const Device device = lease.device();
  const uint64_t bytes = lease.item_.kind == Kind::kStream ? 0 : lease.item_.bytes;
  // Held, not idle: the lease goes back to the pool (or is freed) only
  // when Release finds its device settled.
  Retire(device, std::make_shared<Lease>(std::move(lease)), bytes);
}

void DevicePool::Retire(Device device, std::shared_ptr<void> keep, uint64_t bytes, bool forever) {
  if (keep == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  ForgetIfForkedLocked();
  retired_.push_back(Retired{device, std::move(keep), bytes, pid_, forever});
  ++stats_.retired;
  stats_.retired_bytes += bytes;
  ++stats_.retirements;
}

void DevicePool::Release() {
  // Retired memory first: what a settled device no longer uses is let go
  // (a retired lease comes back as idle, and is freed with the rest below).
  std::vector<Retired> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetIfForkedLocked();
    retired.swap(retired_);
  }
  std::map<Device, bool> settled;
  std::vector<Retired> kept;
  const pid_t now = getpid();
  for (Retired& r : retired) {
    if (r.pid != now || r.forever) {
      kept.push_back(std::move(r));
      continue;
    }
    auto it = settled.find(r.device);
    if (it == settled.end()) it = settled.emplace(r.device, runtime_.DeviceSettled(r.device)).first;
    if (!it->second) kept.push_back(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Retired& r : retired) {
      if (r.keep == nullptr) continue;  // moved into kept
      --stats_.retired;
      stats_.retired_bytes -= r.bytes;
    }
    // (A forked child counts none of the parent's: ForgetIfForkedLocked.)
    for (Retired& r : kept) retired_.push_back(std::move(r));
  }
  retired.clear();  // drops what settled devices no longer use, outside the lock
  std::vector<Item> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetIfForkedLocked();
    doomed.swap(idle_);
    for (const Item& item : doomed) CountLocked(item, -1);
    ++generation_;
  }
  for (const Item& item : doomed) Free(item);
}

void DevicePool::ForgetDevice(Device device) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epochs_[device];
  ++resets_;
  for (auto it = idle_.begin(); it != idle_.end();) {
    // Pinned blocks belong to the context that allocated them: the reset
    // freed those too.
    if (it->device == device) {
      CountLocked(*it, -1);
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
}

PoolFor::PoolFor(DeviceRuntime& runtime) : pool_(runtime.pool()) {
  if (pool_ == nullptr) {
    own_ = std::make_unique<DevicePool>(runtime, kDefaultPinnedPoolBytes);
    pool_ = own_.get();
  }
}

}  // namespace rckpt
