#include "placement_flags.h"

namespace rckpt::cli {
namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

Status ParsePlacementFlags(Args& args, Placement* out) {
  LoadOptions& o = out->options;
  if (auto v = args.Value("map-location")) {
    RCKPT_ASSIGN_OR_RETURN(o.map_location, MapLocation::Parse(*v));
  }
  if (auto v = args.Value("model-device")) {
    RCKPT_ASSIGN_OR_RETURN(DeviceSpec d, DeviceSpec::Parse(*v));
    o.model_device = d;
  }
  if (auto v = args.Value("sections")) o.sections = SplitCommas(*v);
  if (auto v = args.Value("skip-sections")) o.skip_sections = SplitCommas(*v);
  auto emulate = args.Value("emulate-devices");
  auto driver = args.Value("cuda-driver");
  if (emulate && driver) {
    return Status::InvalidArgument(
        "--emulate-devices and --cuda-driver are incompatible: emulated devices use no driver");
  }
  if (emulate) {
    RCKPT_ASSIGN_OR_RETURN(uint64_t n, ParseCount("emulate-devices", *emulate, 64));
    out->runtime = NewEmulatedRuntime(static_cast<int>(n));
  }
  if (driver) {
    RCKPT_ASSIGN_OR_RETURN(out->runtime, NewCudaRuntime({.driver_library = *driver}));
  }
  o.runtime = out->runtime.get();
  return Status::Ok();
}

}  // namespace rckpt::cli
