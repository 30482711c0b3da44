// Device: where a tensor's bytes live (host memory or one CUDA device).
//
// A Device is a small value: `cpu` or `cuda:N`. Every tensor in a checkpoint
// records the Device it was saved from (its origin); loading maps origins to
// targets by the policy in options.h.
#ifndef RCKPT_DEVICE_H_
#define RCKPT_DEVICE_H_

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt {

enum class DeviceType : uint8_t { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  // Always 0 for kCpu; kCurrentCuda for the current CUDA device.
  int32_t index = 0;

  // The index of CurrentCuda(): no device of its own.
  static constexpr int32_t kCurrentCuda = -1;

  static constexpr Device Cpu() { return Device{}; }
  static constexpr Device Cuda(int32_t i) { return Device{DeviceType::kCuda, i}; }
  // A bare "cuda": the process's current CUDA device, as torch means it (its
  // current_device(); in C++ the calling thread's current context's device,
  // else LOCAL_RANK's, else the first visible). A device a caller asks for,
  // never one a file records: a load resolves it on its calling thread before
  // it places anything (DeviceRuntime::CurrentDevice, LoadOptions::
  // auto_device), so under torchrun every rank's "cuda" is its own GPU.
  static constexpr Device CurrentCuda() { return Device{DeviceType::kCuda, kCurrentCuda}; }

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  bool is_current_cuda() const { return is_cuda() && index == kCurrentCuda; }

  // "cpu", "cuda:N", or "cuda" for CurrentCuda().
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
};

// Parses a device a caller asks for: "cpu", "cuda:N" (N a decimal in
// [0, 2^31)) and a bare "cuda", Device::CurrentCuda() (the current device,
// as torch.load's map_location="cuda" means it). Returns InvalidArgument
// naming the text otherwise (e.g. "cuda:x", "gpu").
Result<Device> ParseDevice(std::string_view text);

// Parses a device as a file or an origin records it: "cpu" and "cuda:N"; a
// bare "cuda" (a writer that left the index out) is recorded as cuda:0.
Result<Device> ParseRecordedDevice(std::string_view text);

// A requested model device: a concrete Device or "auto".
// "auto" is the process's own GPU: in C++ the calling thread's current CUDA
// device (its current context's, as cudaSetDevice or torch.cuda.set_device
// made it; on a thread with none, LOCAL_RANK's device when the launcher set
// it and it is visible, else the first visible device), captured when a load
// starts; in Python torch.cuda.current_device(). Under torchrun, after
// torch.cuda.set_device(local_rank), every rank restores onto its own GPU.
// Only when there is no GPU (DeviceRuntime::DeviceCount() is 0) is it cpu;
// a GPU that is present but unusable is an error, never a quiet fallback.
// A bare "cuda" is the same device where there is a GPU, and an error
// (DeviceUnavailable) where there is none.
class DeviceSpec {
 public:
  static DeviceSpec Auto() { return DeviceSpec(true, Device::Cpu()); }
  static DeviceSpec Of(Device d) { return DeviceSpec(false, d); }

  // Accepts "auto" and everything ParseDevice accepts.
  static Result<DeviceSpec> Parse(std::string_view text);

  bool is_auto() const { return auto_; }
  Device device() const { return device_; }  // meaningless when is_auto()

  std::string ToString() const { return auto_ ? "auto" : device_.ToString(); }

 private:
  DeviceSpec(bool is_auto, Device d) : auto_(is_auto), device_(d) {}
  bool auto_;
  Device device_;
};

}  // namespace rckpt

#endif  // RCKPT_DEVICE_H_
