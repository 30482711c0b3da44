// What the `rckpt` tool prints: text and JSON renderings of the library's
// reports (docs/CLI.md; schema_version 1, diff's 2), its exit codes, and
// load errors in the words of its flags. Part of the tool, not of the
// library's API; rckpt-train-demo links it for the same exit codes and
// messages.
#ifndef RCKPT_TOOLS_RENDER_H_
#define RCKPT_TOOLS_RENDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "rckpt/diff.h"
#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "rckpt/options.h"

namespace rckpt {
class JsonWriter;
}  // namespace rckpt

namespace rckpt::cli {

// A load error message with LoadOptions field names (model_device="auto",
// map_location, sections, ...) rewritten as the command-line flags that set
// them (--model-device auto, --map-location, --sections, ...), for programs
// whose users typed flags: the rckpt tool and rckpt-train-demo.
std::string InFlagTerms(std::string_view message);

// `rckpt inspect`: a human-readable table, or JSON.
std::string RenderInspectText(const InspectReport& report);
std::string RenderInspectJson(const InspectReport& report);

// The state tree as JSON (docs/CLI.md "Tree JSON"): JSON scalars, strings,
// arrays and objects where they fit, tagged objects ({"$tuple": [...]},
// {"$tensor": name}, ...) where they do not.
std::string TreeToJson(const Value& tree);

// `rckpt plan` and `rckpt load` (docs/RELOCATION.md). The placements come
// from PlanLoad (plan) or from the loaded checkpoint (load).
// Text: one row per tensor and RNG record (kind, name, section, role, origin,
// target) and a summary of how many go to each device. JSON:
// {"schema_version":1,"placements":[{"name","kind":"tensor"|"rng",
// "section" (null for RNG records),"role","origin","target"}]}.
std::string RenderPlanText(const std::vector<rckpt::Placement>& placements);
std::string RenderPlanJson(const std::vector<rckpt::Placement>& placements);

struct LoadReport {
  std::string path;
  std::string runtime;  // DeviceRuntime::name() of the runtime used
  LoadStats stats;
  bool mapped = false;  // loaded with LoadOptions::map_file
  std::vector<rckpt::Placement> placements;
};

// Loads `path` for real with `options` (its stats pointer is replaced) and
// records where every tensor and RNG record went; the loaded checkpoint is
// released before returning. Errors: those of Load.
Result<LoadReport> LoadForReport(const std::string& path, LoadOptions options);

// Text: bytes, seconds, rate (rckpt/human_bytes.h units), staging high-water
// of capacity, then the placement table. JSON: {"schema_version":1,"path",
// "runtime","bytes_read","bytes_restored","seconds","gb_per_s",
// "staging_high_water","staging_capacity","device_unshuffled_bytes",
// "host_unshuffled_bytes","host_unshuffle_reason","device_pool","mapped","placements":
// [...as plan...]}. The text adds an "unshuffle" line (device and host
// bytes, the host's reason) when byte-shuffled chunks went to a device.
std::string RenderLoadText(const LoadReport& report);
// {"pinned_bytes","pinned_cap","device_scratch_bytes","streams","events",
// "pinned_allocations","device_allocations","streams_created",
// "events_created","unpinned_leases"} (rckpt/runtime.h, DevicePoolStats):
// `rckpt load --json`'s "device_pool" and `rckpt doctor --json`'s.
void DevicePoolJson(JsonWriter& w, const DevicePoolStats& pool);
std::string RenderLoadJson(const LoadReport& report);

// `rckpt diff`. Text: one line per difference and a summary, then what was
// not compared. JSON (schema_version 2): {"schema_version":2,"mode":"state"|
// "strict"|"tensors","a","b","identical":bool,"count":N,"differences":
// [{"kind","name","detail"}],"not_compared":[{"what","why"}]}.
std::string RenderDiffText(const DiffReport& report, const std::string& a, const std::string& b);
std::string RenderDiffJson(const DiffReport& report, const std::string& a, const std::string& b);

}  // namespace rckpt::cli

#endif  // RCKPT_TOOLS_RENDER_H_
