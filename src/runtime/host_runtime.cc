// The host runtime: no CUDA devices. Pinned memory is plain aligned host
// memory; every device operation reports DeviceUnavailable.
#include <new>
#include <string>

#include "rckpt/runtime.h"

namespace rckpt {
namespace {

constexpr std::align_val_t kPinnedAlign{4096};

Status NoDevice(std::string_view what, Device device) {
  return Status::DeviceUnavailable(std::string(what) + ": device " +
                                   device.ToString() +
                                   " does not exist (the host runtime has 0 "
                                   "CUDA devices)");
}

class HostRuntimeImpl final : public DeviceRuntime {
 public:
  std::string_view name() const override { return "host"; }
  Result<int> DeviceCount() override { return 0; }
  std::string NoDeviceReason() override { return "the host runtime has no devices"; }
  Result<int> CurrentDevice() override {
    return Status::DeviceUnavailable("CurrentDevice: the host runtime has no devices");
  }

  Result<void*> Allocate(Device device, uint64_t /*bytes*/) override {
    return NoDevice("Allocate", device);
  }
  void Free(Device /*device*/, void* /*ptr*/) override {}

  Result<void*> AllocatePinned(Device /*device*/, uint64_t bytes) override {
    void* p =
        ::operator new(bytes == 0 ? 1 : bytes, kPinnedAlign, std::nothrow);
    if (p == nullptr) {
      return Status::OutOfMemory("AllocatePinned: " + std::to_string(bytes) +
                                 " bytes");
    }
    return p;
  }
  void FreePinned(void* ptr) override {
    if (ptr != nullptr) ::operator delete(ptr, kPinnedAlign);
  }

  Result<Stream> CreateStream(Device device) override {
    return NoDevice("CreateStream", device);
  }
  void DestroyStream(Device /*device*/, Stream /*stream*/) override {}
  Status CopyToDeviceAsync(Device device, Stream /*stream*/, void* /*dst*/,
                           const void* /*src*/, uint64_t /*bytes*/) override {
    return NoDevice("CopyToDeviceAsync", device);
  }
  Status CopyToHostAsync(Device device, Stream /*stream*/, void* /*dst*/,
                         const void* /*src*/, uint64_t /*bytes*/) override {
    return NoDevice("CopyToHostAsync", device);
  }
  bool CanUnshuffle(Device /*device*/, std::string* why_not) override {
    if (why_not != nullptr) *why_not = "the host runtime has no devices";
    return false;
  }
  Status UnshuffleAsync(Device device, Stream /*stream*/, void* /*dst*/,
                        const void* /*src*/, uint64_t /*bytes*/,
                        uint32_t /*elem_size*/) override {
    return NoDevice("UnshuffleAsync", device);
  }
  Result<Event> RecordEvent(Device device, Stream /*stream*/) override {
    return NoDevice("RecordEvent", device);
  }
  Status StreamWaitEvent(Device device, Stream /*stream*/, Event /*event*/) override {
    return NoDevice("StreamWaitEvent", device);
  }
  Status WaitEvent(Event /*event*/) override { return Status::Ok(); }
  void DestroyEvent(Event /*event*/) override {}
  Status Synchronize(Device device, Stream /*stream*/) override {
    return NoDevice("Synchronize", device);
  }
};

}  // namespace

DeviceRuntime& HostRuntime() {
  static HostRuntimeImpl* runtime = new HostRuntimeImpl();  // never destroyed
  return *runtime;
}

}  // namespace rckpt
