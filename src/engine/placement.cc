#include "engine/placement.h"

#include <algorithm>
#include <set>

namespace rckpt {

std::string DescribeCudaDevices(int n) {
  if (n <= 0) return "no CUDA device";
  if (n == 1) return "1 CUDA device (cuda:0)";
  return std::to_string(n) +
         " CUDA devices (cuda:0 to cuda:" + std::to_string(n - 1) + ")";
}

bool DeviceExists(Device device, int cuda_device_count) {
  if (device.is_cpu()) return true;
  return device.index >= 0 && device.index < cuda_device_count;
}

Status CheckLoadOptions(const LoadOptions& options, int cuda_device_count) {
  if (options.map_location.is_set() && options.model_device.has_value()) {
    return Status::InvalidArgument(
        "map_location and model_device are incompatible: pass one of them "
        "(map_location=" +
        options.map_location.ToString() +
        ", model_device=" + options.model_device->ToString() + ")");
  }
  if (options.staging_bytes == 0) {
    return Status::InvalidArgument(
        "staging_bytes: 0, expected at least 1 (default 64 MiB)");
  }
  if (options.threads < 0) {
    return Status::InvalidArgument(
        "threads: " + std::to_string(options.threads) +
        ", expected >= 0 (0 = all cores)");
  }
  if (options.model_device.has_value() && !options.model_device->is_auto()) {
    Device d = options.model_device->device();
    if (!DeviceExists(d, cuda_device_count)) {
      return Status::DeviceUnavailable("model_device " + d.ToString() +
                                       " does not exist: this machine has " +
                                       DescribeCudaDevices(cuda_device_count));
    }
  }
  return Status::Ok();
}

const std::vector<std::string>& CanonicalSections() {
  static const auto* names = new std::vector<std::string>{
      "model",      "loss",    "optimizer", "scheduler",
      "controller", "metrics", "evaluator", "database"};
  return *names;
}

namespace {

Status CheckSectionNames(const std::vector<std::string>& names,
                         std::string_view option,
                         const std::set<std::string>& known) {
  for (const std::string& name : names) {
    if (known.count(name) == 0) {
      std::string list;
      for (const std::string& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      return Status::InvalidArgument(std::string(option) +
                                     ": unknown section '" + name +
                                     "' (known: " + list + ")");
    }
  }
  return Status::Ok();
}

std::string Quote(std::string_view s) { return std::string("'").append(s).append("'"); }

// The error of a load with no options for a tensor whose origin is missing.
Status AsStoredUnavailable(const TensorMeta& t, int count) {
  std::string map_example =
      "{\"" + t.origin.ToString() + "\": \"" +
      (count > 0 ? std::string("cuda:0") : std::string("cpu")) + "\"}";
  return Status::DeviceUnavailable(
      "tensor " + Quote(t.name) + " (section " + Quote(t.section) +
      ") was saved on " + t.origin.ToString() +
      ", which does not exist here: this machine has " +
      DescribeCudaDevices(count) +
      "; pass model_device=\"auto\" (model tensors to cuda:0 when a CUDA "
      "device is usable, everything else to cpu) or map_location (a device "
      "such as \"cpu\", or a tag map such as " +
      map_example + ")");
}

Status MappedUnavailable(const TensorMeta& t, Device target,
                         const MapLocation& map, int count) {
  return Status::DeviceUnavailable(
      "tensor " + Quote(t.name) + " (section " + Quote(t.section) +
      ", saved on " + t.origin.ToString() + "): map_location " +
      map.ToString() + " sends it to " + target.ToString() +
      ", which does not exist: this machine has " + DescribeCudaDevices(count));
}

}  // namespace

Result<std::vector<size_t>> SelectTensors(
    const std::vector<SectionInfo>& sections,
    const std::vector<TensorMeta>& tensors, const LoadOptions& options) {
  std::set<std::string> known(CanonicalSections().begin(),
                              CanonicalSections().end());
  for (const SectionInfo& s : sections) known.insert(s.name);
  RCKPT_RETURN_IF_ERROR(CheckSectionNames(options.sections, "sections", known));
  RCKPT_RETURN_IF_ERROR(
      CheckSectionNames(options.skip_sections, "skip_sections", known));
  const std::set<std::string> want(options.sections.begin(),
                                   options.sections.end());
  const std::set<std::string> skip(options.skip_sections.begin(),
                                   options.skip_sections.end());
  std::vector<size_t> chosen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& s = tensors[i].section;
    if (!want.empty() && want.count(s) == 0) continue;
    if (skip.count(s) != 0) continue;
    chosen.push_back(i);
  }
  return chosen;
}

Result<LoadPlan> PlanPlacements(const std::vector<SectionInfo>& sections,
                                const std::vector<TensorMeta>& tensors,
                                const std::vector<RngRecord>& rng,
                                const LoadOptions& options,
                                int cuda_device_count,
                                const std::vector<size_t>* only) {
  std::vector<size_t> chosen;
  if (only != nullptr) {
    chosen = *only;
  } else {
    RCKPT_ASSIGN_OR_RETURN(chosen, SelectTensors(sections, tensors, options));
  }

  const std::optional<Device> model_device =
      options.model_device.has_value()
          ? std::optional<Device>(
                options.model_device->Resolve(cuda_device_count))
          : std::nullopt;

  LoadPlan plan;
  plan.placements.reserve(chosen.size() + rng.size());
  plan.tensor_index = chosen;
  for (size_t index : chosen) {
    const TensorMeta& t = tensors[index];
    Device target = Device::Cpu();
    if (t.role == Role::kHost) {
      target = Device::Cpu();
    } else if (model_device.has_value()) {
      target = t.role == Role::kModel ? *model_device : Device::Cpu();
    } else if (options.map_location.is_set()) {
      target = options.map_location.Apply(t);
      if (!DeviceExists(target, cuda_device_count)) {
        return MappedUnavailable(t, target, options.map_location,
                                 cuda_device_count);
      }
    } else {
      target = t.origin;
      if (!DeviceExists(target, cuda_device_count)) {
        return AsStoredUnavailable(t, cuda_device_count);
      }
    }
    plan.placements.push_back(
        Placement{t.name, false, t.section, t.role, t.origin, target});
  }
  for (const RngRecord& r : rng) {
    plan.placements.push_back(
        Placement{r.name, true, "", Role::kHost, r.origin, Device::Cpu()});
  }
  return plan;
}

}  // namespace rckpt
