// DevicePool: the pinned staging memory, device scratch and streams that
// loads and saves lease from their runtime instead of making and freeing
// their own on every call. Pinning and freeing cost what a real device
// makes them cost: cuMemHostAlloc page-locks (10-30 ms for 64 MiB), and
// cuMemFree / cuMemFreeHost wait for every stream of the device (other
// threads' copies, NCCL, the next step's kernels). So the pool allocates
// once, grows on demand, and frees only when told (Release, exit, the
// runtime's end).
//
//   pinned  : host blocks, the smallest idle one that fits is leased; a
//             request none fits allocates a new block while the pool's
//             pinned bytes stay within the cap, freeing idle blocks first
//             when it would pass it (a one-time cost when the need grows);
//             when leased blocks alone fill the cap, the lease is ordinary
//             host memory (copies from and to it are slower, and nothing
//             waits for the device).
//   scratch : device memory, per device, leased like pinned blocks, no cap
//             (one buffer per concurrent load of a device); a larger need
//             replaces the idle smaller buffers of its device.
//   streams : per device; a lease takes an idle one or makes one.
//
// A lease is returned when it is destroyed; what it returns must have no
// work pending (the lessee waited for its copies). Concurrent calls each
// lease their own: nothing is shared while leased, nothing serialises.
// A lessee that could not wait (recording or waiting on an event failed)
// retires the lease instead (Retire): a copy may still read or write it,
// so it is kept out of reuse and freed only once its device is settled
// (DeviceRuntime::DeviceSettled), which Release asks.
//
// Thread-safety: every method may be called from any thread.
#ifndef RCKPT_SRC_RUNTIME_DEVICE_POOL_H_
#define RCKPT_SRC_RUNTIME_DEVICE_POOL_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "rckpt/runtime.h"

namespace rckpt {

class DevicePool {
 public:
  // `runtime` makes and frees what the pool holds; it must outlive the pool.
  DevicePool(DeviceRuntime& runtime, uint64_t pinned_cap);
  // Frees everything idle. REQUIRES: no lease outstanding.
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  enum class Kind : uint8_t { kPinned, kScratch, kStream };

  // One leased resource; returned to its pool when destroyed or Return()ed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Return(); }

    explicit operator bool() const { return pool_ != nullptr; }
    // Pinned or scratch memory: at least the bytes asked for.
    std::byte* data() const { return static_cast<std::byte*>(item_.handle); }
    Stream stream() const { return Stream{item_.handle}; }
    Device device() const { return item_.device; }
    // false: ordinary host memory, leased past the pinned cap.
    bool pinned() const { return item_.pooled; }
    void Return();

   private:
    friend class DevicePool;
    struct Item {
      Kind kind = Kind::kPinned;
      Device device;
      void* handle = nullptr;
      uint64_t bytes = 0;
      uint64_t generation = 0;  // the pool's when made
      uint64_t epoch = 0;       // its device's reset count when made
      pid_t pid = 0;            // the process that made it
      bool pooled = true;
    };
    DevicePool* pool_ = nullptr;
    Item item_;
  };

  // Pinned host memory of at least `bytes`, allocated (when it must be) by
  // `device`'s context; usable by copies of every device.
  Result<Lease> LeasePinned(Device device, uint64_t bytes);
  // Device memory of at least `bytes` on `device`.
  Result<Lease> LeaseScratch(Device device, uint64_t bytes);
  // A stream of `device`.
  Result<Lease> LeaseStream(Device device);

  // Keeps `lease` out of reuse: work nobody could wait for may still use
  // it. Counted in DevicePoolStats::retired; Release frees it once its
  // device is settled.
  void Retire(Lease lease);
  // The same for memory the pool did not lease (a load's destinations, a
  // host buffer being uploaded, pinned memory of another owner): `keep`
  // holds it, and is dropped (freeing it) once `device` is settled.
  // `forever`: never dropped, for memory whose owner may be gone by the
  // time the pool is released (a tensor of torch's allocator, released
  // through a Python interpreter that exit has finalised).
  void Retire(Device device, std::shared_ptr<void> keep, uint64_t bytes, bool forever = false);

  // Frees every idle resource now; leased ones are freed when returned.
  // Retired ones are freed (or, leases, returned first) when their device
  // is settled (DeviceRuntime::DeviceSettled, which waits for the whole
  // device), and kept otherwise. Later leases build the pool anew.
  void Release();
  // `device` was reset (cudaDeviceReset) and what the pool held of it is
  // gone with it: forgets it all without freeing anything.
  void ForgetDevice(Device device);
  // How often ForgetDevice ran: a load that failed while it rose may retry.
  uint64_t device_resets() const;

  // Whether an idle resource still exists: the runtime's check, asked
  // before each is leased again (a device reset frees them behind the
  // pool's back). One that does not makes the pool forget its device.
  using Validator = std::function<bool(Kind kind, Device device, void* handle)>;
  void set_validator(Validator v);

  DevicePoolStats Stats();
  uint64_t pinned_cap() const;
  void set_pinned_cap(uint64_t bytes);

 private:
  using Item = Lease::Item;
  Lease Make(Item item);
  // The idle item `pick` chooses, checked by the validator; nullopt when
  // none is picked.
  template <typename Pick>
  std::optional<Item> TakeIdle(Pick pick);
  void Give(Item item);
  // In a process forked after the pool was used, what it holds is the
  // parent's: forgotten, never freed or reused. REQUIRES: mu_ held.
  void ForgetIfForkedLocked();
  bool StaleLocked(const Item& item) const;
  void Free(const Item& item);
  // Held bytes (or count) of `item`'s kind.
  void CountLocked(const Item& item, int sign);

  DeviceRuntime& runtime_;
  mutable std::mutex mu_;
  uint64_t cap_;
  pid_t pid_;
  uint64_t generation_ = 0;
  std::map<Device, uint64_t> epochs_;
  uint64_t resets_ = 0;
  std::vector<Item> idle_;
  struct Retired {
    Device device;
    std::shared_ptr<void> keep;
    uint64_t bytes = 0;
    pid_t pid = 0;
    bool forever = false;
  };
  std::vector<Retired> retired_;
  DevicePoolStats stats_;
  Validator validator_;
};

// The pool of `runtime`, or one made for this call (freed with it) when the
// runtime has none.
class PoolFor {
 public:
  explicit PoolFor(DeviceRuntime& runtime);
  DevicePool& operator*() { return *pool_; }
  DevicePool* operator->() { return pool_; }

 private:
  std::unique_ptr<DevicePool> own_;
  DevicePool* pool_;
};

}  // namespace rckpt

#endif  // RCKPT_SRC_RUNTIME_DEVICE_POOL_H_
