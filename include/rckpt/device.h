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
  int32_t index = 0;  // always 0 for kCpu

  static constexpr Device Cpu() { return Device{}; }
  static constexpr Device Cuda(int32_t i) { return Device{DeviceType::kCuda, i}; }

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }

  // "cpu" or "cuda:N".
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
};

// Parses "cpu", "cuda" (= cuda:0) and "cuda:N" (N a decimal in [0, 2^31)).
// Returns InvalidArgument naming the text otherwise (e.g. "cuda:x", "gpu").
Result<Device> ParseDevice(std::string_view text);

// A requested model device: a concrete Device or "auto".
// "auto" is the process's own GPU: in C++ the calling thread's current CUDA
// device (its current context's, as cudaSetDevice or torch.cuda.set_device
// made it; cuda:0 when it has none), captured when a load starts; in Python
// torch.cuda.current_device(). Under torchrun, after
// torch.cuda.set_device(local_rank), every rank restores onto its own GPU.
// Only when there is no GPU (DeviceRuntime::DeviceCount() is 0) is it cpu;
// a GPU that is present but unusable is an error, never a quiet fallback.
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
