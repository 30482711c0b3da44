#include <cstdio>

#include "placement_flags.h"
#include "rckpt/io.h"
#include "rckpt_only.h"
#include "render.h"

namespace rckpt::cli {

namespace {

// What --model-device auto means here, and why; "" without it.
std::string AutoNote(const LoadOptions& o, int assumed_devices) {
  if (!o.model_device.has_value() || !o.model_device->is_auto()) return "";
  if (assumed_devices >= 0) {
    return assumed_devices > 0 ? "model_device auto: cuda:0 there (a process's current device "
                                 "unless it chose another)\n"
                               : "model_device auto: cpu there (no GPU)\n";
  }
  DeviceRuntime& rt = o.runtime != nullptr ? *o.runtime : DefaultRuntime();
  Result<int> n = rt.DeviceCount();
  if (!n.ok()) return "";  // the plan reported it
  if (*n == 0) return "model_device auto: cpu (no GPU: " + rt.NoDeviceReason() + ")\n";
  Result<int> current = rt.CurrentDevice();
  if (!current.ok()) return "";
  return "model_device auto: cuda:" + std::to_string(*current) +
         " (this process's current CUDA device; in Python, torch.cuda.current_device())\n";
}

int RunPlan(std::vector<std::string> words) {
  Args args(std::move(words));
  bool json = args.Flag("json");
  Placement placement;
  Status s = ParsePlacementFlags(args, &placement);
  auto assume = args.Value("assume-devices");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("plan", pos.status().message());
  if (!s.ok()) return Fail("plan", s);
  if (pos->size() != 1) return Usage("plan", "expected exactly one FILE");
  int devices = -1;
  if (assume) {
    auto n = ParseCount("assume-devices", *assume, 1 << 16);
    if (!n.ok()) return Fail("plan", n.status());
    devices = static_cast<int>(*n);
  }
  auto plan = PlanLoad((*pos)[0], placement.options, devices);
  if (!plan.ok()) return Fail("plan", ExplainOtherFormat("plan", (*pos)[0], plan.status()));
  std::string out = json ? RenderPlanJson(*plan) : RenderPlanText(*plan) +
                                                       AutoNote(placement.options, devices);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

const CommandInfo kPlan = {
    "plan", "show where each tensor would be loaded on this machine, or the load's error",
    std::string(R"(usage: rckpt plan FILE [placement options] [--assume-devices N] [--json]

Prints where every tensor and RNG record of FILE would be placed by a load
with these options on this machine, reading only the manifest; or, when the
load would fail, exactly the error it would give (and its exit code).

  --assume-devices N  plan for a machine with N CUDA devices (to prepare a
                      restart elsewhere)
  --json              {"schema_version":1,"placements":[{name, kind, section,
                      role, origin, target}]} (docs/CLI.md)

)") + kPlacementHelp + R"(
examples:
  rckpt plan last.rckpt                          as stored
  rckpt plan last.rckpt --model-device auto      model to this process's GPU if any
  rckpt plan last.rckpt --map-location cuda:1=cuda:0 --assume-devices 1

Exit codes: 0 ok, 2 invalid options, 3 not found, 4 corrupt, 5 unsupported
(newer format version; a PyTorch, safetensors or DCP checkpoint: convert it
first), 6 device unavailable.
)",
    RunPlan};

}  // namespace rckpt::cli
