#include "rckpt/device.h"

#include <charconv>

namespace rckpt {

std::string Device::ToString() const {
  if (is_cpu()) return "cpu";
  if (is_current_cuda()) return "cuda";
  return "cuda:" + std::to_string(index);
}

Result<Device> ParseDevice(std::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::CurrentCuda();
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view digits = text.substr(kPrefix.size());
    int32_t index = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() &&
        index >= 0 && digits.size() <= 10) {
      return Device::Cuda(index);
    }
  }
  return Status::InvalidArgument("invalid device '" + std::string(text) +
                                 "': expected cpu, cuda or cuda:N");
}

Result<Device> ParseRecordedDevice(std::string_view text) {
  RCKPT_ASSIGN_OR_RETURN(Device d, ParseDevice(text));
  return d.is_current_cuda() ? Device::Cuda(0) : d;
}

Result<DeviceSpec> DeviceSpec::Parse(std::string_view text) {
  if (text == "auto") return DeviceSpec::Auto();
  auto d = ParseDevice(text);
  if (!d.ok()) {
    return Status::InvalidArgument("invalid device '" + std::string(text) +
                                   "': expected auto, cpu, cuda or cuda:N");
  }
  return DeviceSpec::Of(*d);
}

}  // namespace rckpt
