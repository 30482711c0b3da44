#include <cstdio>
#include <map>

#include "cli.h"
#include "rckpt/doctor.h"
#include "rckpt/human_bytes.h"
#include "render.h"
#include "util/json_writer.h"

namespace rckpt::cli {
namespace {

std::string Limit(uint64_t v) { return v == UINT64_MAX ? "unlimited" : HumanBytes(v); }

std::string VersionText(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string RenderDoctorText(const DoctorReport& r) {
  std::string out = "rckpt " + r.rckpt_version;
  if (!r.cuda_built) {
    out += " (built without its CUDA runtime)\n";
  } else {
    out += " (CUDA runtime: the driver is loaded at run time)\n";
    out += "kernel image: " + r.kernel_image + "\n";
    if (r.kernel_min_driver_version > 0) {
      out += "  needs a driver for CUDA " + VersionText(r.kernel_min_driver_version) + " or newer: " +
             r.kernel_min_driver_why + "\n";
    }
    out += "driver: " + (r.driver_path.empty() ? r.driver_library + " (not loaded)" : r.driver_path);
    if (r.driver_version > 0) {
      out += ", CUDA " + VersionText(r.driver_version) + " (cuDriverGetVersion " +
             std::to_string(r.driver_version) + ")";
    }
    out += "\n";
  }
  out += "CUDA_VISIBLE_DEVICES: " +
         (r.cuda_visible_devices_set ? "'" + r.cuda_visible_devices + "'" : std::string("unset")) +
         ", CUDA_DEVICE_ORDER: " +
         (r.cuda_device_order.empty() ? std::string("unset (FASTEST_FIRST)") : r.cuda_device_order) +
         "\n";
  if (r.devices.empty()) {
    out += "devices: none";
    if (!r.no_device_reason.empty()) out += " (" + r.no_device_reason + ")";
    out += "\n";
  } else {
    std::map<std::string, int> per_bus;
    for (const DoctorDevice& d : r.devices) ++per_bus[d.pci_bus_id];
    out += "devices:\n";
    for (const DoctorDevice& d : r.devices) {
      char line[512];
      std::snprintf(line, sizeof(line), "  cuda:%d  %s  %s  %s  bus %s  sm_%d%d", d.index,
                    d.uuid.c_str(), d.name.c_str(), HumanBytes(d.memory_bytes).c_str(),
                    d.pci_bus_id.c_str(), d.compute_major, d.compute_minor);
      out += line;
      if (per_bus[d.pci_bus_id] > 1) out += "  (a MIG instance: its GPU's bus, its slice of memory)";
      if (d.index == r.current_device) out += "  (this process's device)";
      out += "\n";
      if (!d.examined) {
        out += "          not examined: not this process's device (--all-devices examines it)\n";
        continue;
      }
      out += d.kernel_loads ? "          un-shuffle: on the device (kernel loaded)\n"
                            : "          un-shuffle: on the host (" + d.kernel_note + ")\n";
    }
  }
  out += "host memory: " + HumanBytes(r.host_memory_bytes) + " (" +
         HumanBytes(r.host_memory_available) + " available); locked-memory limit " +
         Limit(r.memlock_soft) + " (hard " + Limit(r.memlock_hard) + ")\n";
  if (r.pinned_probe_bytes > 0) {
    out += "pinned memory: " + HumanBytes(r.pinned_probe_bytes) +
           (r.pinned_probe.ok() ? " allocated and freed through cuda:" +
                                      std::to_string(r.current_device) +
                                      "'s context (the staging ring a load uses)\n"
                                : " could not be allocated: " + r.pinned_probe.message() + "\n");
  }
  const DevicePoolStats& p = r.pool;
  out += "device pool: " + HumanBytes(p.pinned_bytes) + " pinned of a " +
         HumanBytes(p.pinned_cap) + " cap (RCKPT_PINNED_POOL_BYTES), " +
         HumanBytes(p.device_scratch_bytes) + " device scratch, " + std::to_string(p.streams) +
         " streams, " + std::to_string(p.events) + " events held for loads and saves\n";
  if (!r.problem.ok()) {
    out += "\nPROBLEM: " + r.problem.message() + "\n";
  } else if (r.devices.empty()) {
    out += "\nOK: no GPU here; loads place device tensors as their options say (model_device "
           "\"auto\" means cpu)\n";
  } else {
    out += "\nOK: " + std::to_string(r.devices.size()) + " usable CUDA device" +
           (r.devices.size() == 1 ? "" : "s") +
           "; model_device \"auto\" means the process's current device\n";
  }
  return out;
}

std::string RenderDoctorJson(const DoctorReport& r) {
  JsonWriter w;
  w.BeginObject().Key("schema_version").Int(1);
  w.Key("rckpt_version").String(r.rckpt_version);
  w.Key("cuda_built").Bool(r.cuda_built);
  w.Key("kernel_image").String(r.kernel_image);
  w.Key("kernel_min_driver_version").Int(r.kernel_min_driver_version);
  w.Key("kernel_min_driver_why").String(r.kernel_min_driver_why);
  w.Key("driver_library").String(r.driver_library);
  w.Key("driver_path").String(r.driver_path);
  w.Key("driver_version").Int(r.driver_version);
  w.Key("cuda_visible_devices");
  if (r.cuda_visible_devices_set) {
    w.String(r.cuda_visible_devices);
  } else {
    w.Null();
  }
  w.Key("cuda_device_order").String(r.cuda_device_order);
  w.Key("devices").BeginArray();
  for (const DoctorDevice& d : r.devices) {
    w.BeginObject()
        .Key("index").Int(d.index)
        .Key("uuid").String(d.uuid)
        .Key("name").String(d.name)
        .Key("memory_bytes").Uint(d.memory_bytes)
        .Key("pci_bus_id").String(d.pci_bus_id)
        .Key("compute_capability").String(std::to_string(d.compute_major) + "." +
                                          std::to_string(d.compute_minor))
        .Key("examined").Bool(d.examined)
        .Key("kernel_loads").Bool(d.kernel_loads)
        .Key("kernel_note").String(d.kernel_note)
        .EndObject();
  }
  w.EndArray();
  w.Key("current_device").Int(r.current_device);
  w.Key("all_devices").Bool(r.all_devices);
  w.Key("no_device_reason").String(r.no_device_reason);
  w.Key("memlock_soft");
  if (r.memlock_soft == UINT64_MAX) w.Null(); else w.Uint(r.memlock_soft);
  w.Key("memlock_hard");
  if (r.memlock_hard == UINT64_MAX) w.Null(); else w.Uint(r.memlock_hard);
  w.Key("pinned_probe_bytes").Uint(r.pinned_probe_bytes);
  w.Key("pinned_probe_ok").Bool(r.pinned_probe.ok());
  w.Key("host_memory_bytes").Uint(r.host_memory_bytes);
  w.Key("device_pool");
  DevicePoolJson(w, r.pool);
  w.Key("usable").Bool(r.problem.ok());
  w.Key("problem").String(r.problem.ok() ? "" : r.problem.message());
  w.EndObject();
  return w.str() + "\n";
}

int RunDoctor(std::vector<std::string> words) {
  Args args(std::move(words));
  const bool json = args.Flag("json");
  DoctorOptions doctor;
  doctor.all_devices = args.Flag("all-devices");
  CudaRuntimeOptions options;
  if (auto v = args.Value("cuda-driver")) options.driver_library = *v;
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("doctor", pos.status().message());
  if (!pos->empty()) return Usage("doctor", "takes no FILE");
  const DoctorReport report = ::rckpt::RunDoctor(options, doctor);
  const std::string out = json ? RenderDoctorJson(report) : RenderDoctorText(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return ExitCodeFor(report.problem);
}

}  // namespace

const CommandInfo kDoctor = {
    "doctor", "say what rckpt sees of this machine's GPUs, and whether it can use them",
    R"(usage: rckpt doctor [--json] [--all-devices] [--cuda-driver LIB]

Loads the CUDA driver the way a load onto a GPU would and reports:
  - rckpt's build, the driver library and the CUDA version it supports, the
    architectures of the shipped un-shuffle kernel, the oldest driver that
    loads it and why, and whether it loads on this process's GPU (where it
    does not, byte-shuffled data is un-shuffled on the host);
  - every device by UUID, with its name, memory, PCI bus id and compute
    capability (MIG instances share their GPU's bus id and have their slice
    of memory), numbered as rckpt and torch number them in this process;
  - CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, the locked-memory limits and a
    trial allocation of the pinned staging memory a load takes.
Only this process's device is examined (its context, the kernel, the pinned
trial through its context): the thread's current device, else the
launcher's LOCAL_RANK, else cuda:0, which is what a bare "cuda" and
--model-device auto mean. Other GPUs are listed with queries that make no
context, so each rank of a job may run it without costing its neighbours
GPU memory.
rckpt.doctor() in Python says the same for torch.cuda.current_device() and
also compares, by UUID, the devices torch sees in that process.

  --json             the report as JSON (schema_version 1)
  --all-devices      examine every visible device (a context on each)
  --cuda-driver LIB  load this driver library instead of libcuda.so.1

Exit codes: 0 when what exists is usable, a machine without a GPU included
(the report says why there is none); 6 when a GPU is present but rckpt
cannot use it (the report names the cause and the fix: a driver older than
CUDA 11.4, cuInit failing, no permission on /dev/nvidia*, no pinned memory).
)",
    RunDoctor};

}  // namespace rckpt::cli
