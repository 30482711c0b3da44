// Rendering of `rckpt plan` and `rckpt load` results (render.h).
#include <cstdio>
#include <map>
#include <string>

#include "rckpt/human_bytes.h"
#include "rckpt/runtime.h"
#include "render.h"
#include "util/json_writer.h"

namespace rckpt::cli {
namespace {

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string Summary(const std::vector<Placement>& placements) {
  std::map<std::string, int> tensors_to;
  int tensors = 0, rng = 0;
  for (const Placement& p : placements) {
    if (p.is_rng) {
      ++rng;
    } else {
      ++tensors;
      ++tensors_to[p.target.ToString()];
    }
  }
  std::string out = std::to_string(tensors) + " tensors";
  std::string sep = ": ";
  for (const auto& [device, n] : tensors_to) {
    out += sep + std::to_string(n) + " to " + device;
    sep = ", ";
  }
  out += "; " + std::to_string(rng) + " RNG records to cpu\n";
  return out;
}

void PlacementsJson(JsonWriter& w, const std::vector<Placement>& placements) {
  w.Key("placements").BeginArray();
  for (const Placement& p : placements) {
    w.BeginObject();
    w.Key("name").String(p.name);
    w.Key("kind").String(p.is_rng ? "rng" : "tensor");
    w.Key("section");
    if (p.is_rng) {
      w.Null();
    } else {
      w.String(p.section);
    }
    w.Key("role").String(RoleName(p.role));
    w.Key("origin").String(p.origin.ToString());
    w.Key("target").String(p.target.ToString());
    w.EndObject();
  }
  w.EndArray();
}

double GigabytesPerSecond(const LoadStats& s) {
  return s.seconds > 0 ? static_cast<double>(s.bytes_restored) / s.seconds / 1e9
                       : 0.0;
}

}  // namespace

std::string RenderPlanText(const std::vector<Placement>& placements) {
  size_t name_w = 4, section_w = 7;
  for (const Placement& p : placements) {
    name_w = std::max(name_w, p.name.size());
    section_w = std::max(section_w, p.section.size());
  }
  std::string out = Pad("KIND", 7) + Pad("NAME", name_w + 2) +
                    Pad("SECTION", section_w + 2) + Pad("ROLE", 7) +
                    Pad("ORIGIN", 9) + "TARGET\n";
  for (const Placement& p : placements) {
    out += Pad(p.is_rng ? "rng" : "tensor", 7) + Pad(p.name, name_w + 2) +
           Pad(p.is_rng ? "-" : p.section, section_w + 2) +
           Pad(std::string(RoleName(p.role)), 7) + Pad(p.origin.ToString(), 9) +
           p.target.ToString() + "\n";
  }
  return out + Summary(placements);
}

std::string RenderPlanJson(const std::vector<Placement>& placements) {
  JsonWriter w;
  w.BeginObject();
  w.Key("schema_version").Int(1);
  PlacementsJson(w, placements);
  w.EndObject();
  return w.str();
}

Result<LoadReport> LoadForReport(const std::string& path, LoadOptions options) {
  LoadReport report;
  report.path = path;
  DeviceRuntime& runtime =
      options.runtime != nullptr ? *options.runtime : DefaultRuntime();
  report.runtime = std::string(runtime.name());
  report.mapped = options.map_file;
  options.stats = &report.stats;
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, Load(path, options));
  for (const TensorEntry& e : ck.tensors()) {
    report.placements.push_back(Placement{e.name, false, e.section, e.role,
                                          e.Origin(), e.tensor.device()});
  }
  for (const RngRecord& r : ck.rng()) {
    report.placements.push_back(
        Placement{r.name, true, "", Role::kHost, r.origin, Device::Cpu()});
  }
  return report;
}

void DevicePoolJson(JsonWriter& w, const DevicePoolStats& p) {
  w.BeginObject()
      .Key("pinned_bytes").Uint(p.pinned_bytes)
      .Key("pinned_cap").Uint(p.pinned_cap)
      .Key("device_scratch_bytes").Uint(p.device_scratch_bytes)
      .Key("streams").Int(p.streams)
      .Key("events").Int(p.events)
      .Key("pinned_allocations").Uint(p.pinned_allocations)
      .Key("device_allocations").Uint(p.device_allocations)
      .Key("streams_created").Uint(p.streams_created)
      .Key("events_created").Uint(p.events_created)
      .Key("unpinned_leases").Uint(p.unpinned_leases)
      .EndObject();
}

std::string RenderLoadText(const LoadReport& r) {
  char time[64];
  std::snprintf(time, sizeof time, "%.3f s, %s", r.stats.seconds,
                RenderRate(r.stats.bytes_restored, r.stats.seconds).c_str());
  const LoadStats& s = r.stats;
  bool on_device = false;
  for (const rckpt::Placement& p : r.placements) on_device |= p.target.is_cuda();
  // The runtime is named only when a device was used: a host load touches
  // none (and never the driver).
  std::string out = "loaded " + r.path +
                    (on_device ? " with the " + r.runtime + " runtime" : std::string(" into host memory")) +
                    (r.mapped ? ", file mapped" : "") + "\n";
  out += "  restored  " + HumanBytes(s.bytes_restored) + " (" +
         std::to_string(s.bytes_restored) + " bytes), " +
         HumanBytes(s.bytes_read) + " read from the file\n";
  out += "  time      " + std::string(time) + "\n";
  out += s.staging_capacity == 0
             ? std::string("  staging   none (no device destination)\n")
             : "  staging   high-water " + HumanBytes(s.staging_high_water) +
                   " of " + HumanBytes(s.staging_capacity) + " pinned; the pool keeps " +
                   HumanBytes(s.device_pool.pinned_bytes) + " of a " +
                   HumanBytes(s.device_pool.pinned_cap) + " cap for the next call\n";
  if (s.device_unshuffled_bytes + s.host_unshuffled_bytes > 0) {
    out += "  unshuffle " + HumanBytes(s.device_unshuffled_bytes) + " on the device, " +
           HumanBytes(s.host_unshuffled_bytes) + " on the host" +
           (s.host_unshuffled_bytes > 0 ? " (" + s.host_unshuffle_reason + ")" : "") + "\n";
  }
  return out + RenderPlanText(r.placements);
}

std::string RenderLoadJson(const LoadReport& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("schema_version").Int(1);
  w.Key("path").String(r.path);
  w.Key("runtime").String(r.runtime);
  w.Key("bytes_read").Uint(r.stats.bytes_read);
  w.Key("bytes_restored").Uint(r.stats.bytes_restored);
  w.Key("seconds").Double(r.stats.seconds);
  w.Key("gb_per_s").Double(GigabytesPerSecond(r.stats));
  w.Key("staging_high_water").Uint(r.stats.staging_high_water);
  w.Key("staging_capacity").Uint(r.stats.staging_capacity);
  w.Key("device_unshuffled_bytes").Uint(r.stats.device_unshuffled_bytes);
  w.Key("host_unshuffled_bytes").Uint(r.stats.host_unshuffled_bytes);
  w.Key("host_unshuffle_reason").String(r.stats.host_unshuffle_reason);
  w.Key("device_pool");
  DevicePoolJson(w, r.stats.device_pool);
  w.Key("mapped").Bool(r.mapped);
  PlacementsJson(w, r.placements);
  w.EndObject();
  return w.str();
}

}  // namespace rckpt::cli
