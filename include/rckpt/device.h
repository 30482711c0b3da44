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
// "auto" resolves to cuda:0 when the runtime has at least one usable CUDA
// device, else to cpu.
class DeviceSpec {
 public:
  static DeviceSpec Auto() { return DeviceSpec(true, Device::Cpu()); }
  static DeviceSpec Of(Device d) { return DeviceSpec(false, d); }

  // Accepts "auto" and everything ParseDevice accepts.
  static Result<DeviceSpec> Parse(std::string_view text);

  bool is_auto() const { return auto_; }
  Device device() const { return device_; }  // meaningless when is_auto()

  // Resolves against the number of CUDA devices present.
  Device Resolve(int cuda_device_count) const {
    if (!auto_) return device_;
    return cuda_device_count > 0 ? Device::Cuda(0) : Device::Cpu();
  }
  std::string ToString() const { return auto_ ? "auto" : device_.ToString(); }

 private:
  DeviceSpec(bool is_auto, Device d) : auto_(is_auto), device_(d) {}
  bool auto_;
  Device device_;
};

}  // namespace rckpt

#endif  // RCKPT_DEVICE_H_
