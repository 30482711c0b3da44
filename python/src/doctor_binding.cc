#include "doctor_binding.h"

#include <nanobind/stl/string.h>

#include "rckpt/doctor.h"

namespace rckpt::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

nb::object Limit(uint64_t v) { return v == UINT64_MAX ? nb::none() : nb::object(nb::int_(v)); }

nb::dict Doctor(const std::string& driver_library, bool all_devices, int device) {
  DoctorReport r;
  {
    nb::gil_scoped_release release;
    r = RunDoctor({.driver_library = driver_library},
                  {.all_devices = all_devices, .device = device});
  }
  nb::dict out;
  out["rckpt_version"] = r.rckpt_version;
  out["cuda_built"] = r.cuda_built;
  out["kernel_image"] = r.kernel_image;
  out["kernel_min_driver_version"] = r.kernel_min_driver_version;
  out["kernel_min_driver_why"] = r.kernel_min_driver_why;
  out["current_device"] = r.current_device;
  out["all_devices"] = r.all_devices;
  out["driver_library"] = r.driver_library;
  out["driver_path"] = r.driver_path;
  out["driver_version"] = r.driver_version;
  out["cuda_visible_devices"] =
      r.cuda_visible_devices_set ? nb::object(nb::str(r.cuda_visible_devices.c_str())) : nb::none();
  out["cuda_device_order"] = r.cuda_device_order;
  nb::list devices;
  for (const DoctorDevice& d : r.devices) {
    nb::dict e;
    e["index"] = d.index;
    e["uuid"] = d.uuid;
    e["name"] = d.name;
    e["memory_bytes"] = d.memory_bytes;
    e["pci_bus_id"] = d.pci_bus_id;
    e["compute_capability"] = nb::make_tuple(d.compute_major, d.compute_minor);
    e["examined"] = d.examined;
    e["kernel_loads"] = d.kernel_loads;
    e["kernel_note"] = d.kernel_note;
    devices.append(e);
  }
  out["devices"] = devices;
  out["no_device_reason"] = r.no_device_reason;
  out["problem"] = r.problem.ok() ? nb::none() : nb::object(nb::str(r.problem.message().c_str()));
  out["memlock_soft"] = Limit(r.memlock_soft);
  out["memlock_hard"] = Limit(r.memlock_hard);
  out["pinned_probe_bytes"] = r.pinned_probe_bytes;
  out["pinned_probe_error"] =
      r.pinned_probe.ok() ? nb::none() : nb::object(nb::str(r.pinned_probe.message().c_str()));
  out["host_memory_bytes"] = r.host_memory_bytes;
  out["host_memory_available"] = r.host_memory_available;
  out["device_pool"] = DevicePoolDict(r.pool);
  return out;
}

}  // namespace

nb::dict DevicePoolDict(const DevicePoolStats& p) {
  nb::dict d;
  d["pinned_bytes"] = p.pinned_bytes;
  d["pinned_cap"] = p.pinned_cap;
  d["device_scratch_bytes"] = p.device_scratch_bytes;
  d["streams"] = p.streams;
  d["events"] = p.events;
  d["pinned_allocations"] = p.pinned_allocations;
  d["device_allocations"] = p.device_allocations;
  d["streams_created"] = p.streams_created;
  d["events_created"] = p.events_created;
  d["unpinned_leases"] = p.unpinned_leases;
  d["retired"] = p.retired;
  d["retired_bytes"] = p.retired_bytes;
  return d;
}

void RegisterDoctor(nb::module_& m) {
  m.def("device_pool_stats", [] { return DevicePoolDict(DefaultRuntime().PoolStats()); });
  m.def("release_device_pool", [] {
    nb::gil_scoped_release release;
    DefaultRuntime().ReleasePool();
  });
  m.def("doctor", &Doctor, "driver_library"_a = "libcuda.so.1", "all_devices"_a = false,
        "device"_a = -1);
}

}  // namespace rckpt::python
