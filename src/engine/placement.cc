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

DeviceInventory::DeviceInventory(DeviceRuntime& runtime,
                                 std::function<Result<int>(int device_count)> auto_device)
    : runtime_(&runtime), auto_device_(std::move(auto_device)) {}

DeviceInventory DeviceInventory::Assumed(int count) {
  DeviceInventory d;
  d.count_ = Result<int>(count < 0 ? 0 : count);
  d.current_ = count > 0 ? 0 : -1;
  if (count <= 0) d.no_device_reason_ = "as assumed";
  return d;
}

Result<int> DeviceInventory::Count() {
  if (!count_.has_value()) {
    count_ = runtime_->DeviceCount();
    if (count_->ok() && **count_ == 0) no_device_reason_ = runtime_->NoDeviceReason();
  }
  return *count_;
}

std::string DeviceInventory::Describe() {
  Result<int> n = Count();
  if (!n.ok()) return "";
  if (*n > 0 || no_device_reason_.empty()) return DescribeCudaDevices(*n);
  return "no CUDA device (" + no_device_reason_ + ")";
}

Result<bool> DeviceInventory::Exists(Device device) {
  if (device.is_cpu()) return true;
  RCKPT_ASSIGN_OR_RETURN(int n, Count());
  return device.index >= 0 && device.index < n;
}

Result<int> DeviceInventory::CurrentIndex() {
  RCKPT_ASSIGN_OR_RETURN(int n, Count());
  if (!current_.has_value()) {
    if (auto_device_) {
      RCKPT_ASSIGN_OR_RETURN(int c, auto_device_(n));
      current_ = c;
    } else if (n > 0) {
      RCKPT_ASSIGN_OR_RETURN(int c, runtime_->CurrentDevice());
      current_ = c;
    } else {
      current_ = -1;
    }
  }
  return *current_;
}

Result<Device> DeviceInventory::Auto() {
  RCKPT_ASSIGN_OR_RETURN(int c, CurrentIndex());
  if (c == -1) return Device::Cpu();
  return CurrentCuda("model_device auto");
}

Result<Device> DeviceInventory::CurrentCuda(const std::string& what) {
  RCKPT_ASSIGN_OR_RETURN(int n, Count());
  RCKPT_ASSIGN_OR_RETURN(int c, CurrentIndex());
  if (c == -1) {
    return Status::DeviceUnavailable(what + ": \"cuda\" is the current CUDA device, and this " +
                                     "machine has " + Describe() + "; load with map_location=\"cpu\"");
  }
  if (c < 0 || c >= n) {
    return Status::DeviceUnavailable(what + ": the current device cuda:" + std::to_string(c) +
                                     " does not exist: this machine has " + Describe());
  }
  return Device::Cuda(c);
}

Result<Device> DeviceInventory::Resolve(Device d, const std::string& what) {
  if (!d.is_current_cuda()) return d;
  return CurrentCuda(what);
}

Status CheckLoadOptions(const LoadOptions& options, DeviceInventory& devices) {
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
        ", expected >= 0 (0 = the process's share of the node)");
  }
  if (options.model_device.has_value() && !options.model_device->is_auto()) {
    RCKPT_ASSIGN_OR_RETURN(Device d, devices.Resolve(options.model_device->device(),
                                                     "model_device cuda"));
    RCKPT_ASSIGN_OR_RETURN(bool exists, devices.Exists(d));
    if (!exists) {
      return Status::DeviceUnavailable("model_device " + d.ToString() +
                                       " does not exist: this machine has " +
                                       devices.Describe());
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

// The edit distance between two names, for "did you mean".
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// `known` is every name accepted; `in_file` the file's own, which the
// message lists.
Status CheckSectionNames(const std::vector<std::string>& names,
                         std::string_view option,
                         const std::set<std::string>& known,
                         const std::vector<SectionInfo>& in_file) {
  for (const std::string& name : names) {
    if (known.count(name) != 0) continue;
    std::string list;
    for (const SectionInfo& s : in_file) {
      if (!list.empty()) list += ", ";
      list += s.name;
    }
    std::string closest;
    size_t best = std::max<size_t>(2, name.size() / 3) + 1;
    for (const std::string& k : known) {
      const size_t d = Distance(name, k);
      if (d < best) {
        best = d;
        closest = k;
      }
    }
    return Status::InvalidArgument(
        std::string(option) + ": unknown section '" + name + "'" +
        (closest.empty() ? "" : " (did you mean '" + closest + "'?)") + "; this file's sections: " +
        (list.empty() ? "none" : list));
  }
  return Status::Ok();
}

std::string Quote(std::string_view s) { return std::string("'").append(s).append("'"); }

// The error of a load with no options for a tensor whose origin is missing.
Status AsStoredUnavailable(const TensorMeta& t, DeviceInventory& devices, int count) {
  std::string map_example =
      "{\"" + t.origin.ToString() + "\": \"" +
      (count > 0 ? std::string("cuda:0") : std::string("cpu")) + "\"}";
  return Status::DeviceUnavailable(
      "tensor " + Quote(t.name) + " (section " + Quote(t.section) +
      ") was saved on " + t.origin.ToString() +
      ", which does not exist here: this machine has " + devices.Describe() +
      "; pass model_device=\"auto\" (model tensors to this process's current CUDA "
      "device when there is a GPU, everything else to cpu) or map_location (a device "
      "such as \"cpu\", or a tag map such as " +
      map_example + ")");
}

// The devices the chosen tensors were saved on: "cuda:1, cpu".
std::string SavedDevices(const std::vector<TensorMeta>& tensors, const std::vector<size_t>& chosen) {
  std::set<Device> seen;
  for (size_t i : chosen) seen.insert(tensors[i].origin);
  std::string out;
  for (const Device& d : seen) {
    if (!out.empty()) out += ", ";
    out += d.ToString();
  }
  return out;
}

Status MappedUnavailable(const TensorMeta& t, std::optional<Device> mapped, Device target,
                         const MapLocation& map, DeviceInventory& devices,
                         const std::string& saved_on) {
  const std::string where = "this machine has " + devices.Describe();
  if (!mapped.has_value() && map.is_tag_map()) {
    return Status::DeviceUnavailable(
        "tensor " + Quote(t.name) + " (section " + Quote(t.section) + ") was saved on " +
        t.origin.ToString() + ", which the map_location tag map " + map.ToString() +
        " has no entry for (keys are exact device tags; \"cuda\" means the current device), so it stays on " +
        target.ToString() + ", which does not exist: " + where + ". This file's tensors were saved on " +
        saved_on + "; map each of them (\"" + t.origin.ToString() +
        "=cpu\"), or pass one device (map_location=\"cpu\")");
  }
  if (!mapped.has_value()) {
    return Status::DeviceUnavailable(
        "tensor " + Quote(t.name) + " (section " + Quote(t.section) + ", saved on " +
        t.origin.ToString() + "): map_location " + map.ToString() +
        " left it where it was saved, which does not exist: " + where);
  }
  return Status::DeviceUnavailable(
      "tensor " + Quote(t.name) + " (section " + Quote(t.section) + ", saved on " +
      t.origin.ToString() + "): map_location " + map.ToString() + " sends it to " +
      target.ToString() + ", which does not exist: " + where);
}

}  // namespace

Result<std::vector<size_t>> SelectTensors(
    const std::vector<SectionInfo>& sections,
    const std::vector<TensorMeta>& tensors, const LoadOptions& options) {
  std::set<std::string> known(CanonicalSections().begin(),
                              CanonicalSections().end());
  for (const SectionInfo& s : sections) known.insert(s.name);
  RCKPT_RETURN_IF_ERROR(CheckSectionNames(options.sections, "sections", known, sections));
  RCKPT_RETURN_IF_ERROR(
      CheckSectionNames(options.skip_sections, "skip_sections", known, sections));
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
                                DeviceInventory& devices,
                                const std::vector<size_t>* only) {
  std::vector<size_t> chosen;
  if (only != nullptr) {
    chosen = *only;
  } else {
    RCKPT_ASSIGN_OR_RETURN(chosen, SelectTensors(sections, tensors, options));
  }

  // "auto" is resolved at the first model-role tensor: a load without one
  // never asks the runtime.
  std::optional<Device> model_device;
  auto model_target = [&]() -> Result<Device> {
    if (!model_device.has_value()) {
      if (options.model_device->is_auto()) {
        RCKPT_ASSIGN_OR_RETURN(model_device, devices.Auto());
      } else {
        RCKPT_ASSIGN_OR_RETURN(model_device, devices.Resolve(options.model_device->device(),
                                                             "model_device cuda"));
      }
    }
    return *model_device;
  };

  // A bare "cuda" in map_location is the current device, resolved once on
  // this (the calling) thread; a callback's "cuda" as it answers.
  MapLocation map = options.map_location;
  if (map.NamesCurrentCuda()) {
    RCKPT_ASSIGN_OR_RETURN(Device current, devices.CurrentCuda("map_location " + map.ToString()));
    RCKPT_ASSIGN_OR_RETURN(map, map.WithCurrentCuda(current));
  }

  LoadPlan plan;
  plan.placements.reserve(chosen.size() + rng.size());
  plan.tensor_index = chosen;
  for (size_t index : chosen) {
    const TensorMeta& t = tensors[index];
    Device target = Device::Cpu();
    if (t.role == Role::kHost) {
      target = Device::Cpu();
    } else if (options.model_device.has_value()) {
      if (t.role == Role::kModel) {
        RCKPT_ASSIGN_OR_RETURN(target, model_target());
      }
    } else if (map.is_set()) {
      std::optional<Device> mapped = map.Lookup(t);
      if (mapped.has_value()) {
        RCKPT_ASSIGN_OR_RETURN(mapped, devices.Resolve(*mapped, "map_location's answer for " +
                                                                    Quote(t.name)));
      }
      target = mapped.value_or(t.origin);
      RCKPT_ASSIGN_OR_RETURN(bool exists, devices.Exists(target));
      if (!exists) {
        return MappedUnavailable(t, mapped, target, map, devices, SavedDevices(tensors, chosen));
      }
    } else {
      target = t.origin;
      RCKPT_ASSIGN_OR_RETURN(bool exists, devices.Exists(target));
      if (!exists) {
        RCKPT_ASSIGN_OR_RETURN(int count, devices.Count());
        return AsStoredUnavailable(t, devices, count);
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
