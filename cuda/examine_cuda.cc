// ExamineCuda: the driver library and its devices (context-free queries),
// then the process's own device (or every one, when asked) as rckpt's own
// device path meets it: its context, the kernel there and a pinned
// allocation through that context.
#include <cstdio>
#include <map>

#include "driver.h"
#include "kernel_image.h"
#include "runtime/cuda_doctor.h"
#include "util/hex.h"

namespace rckpt {
namespace {

std::string UuidText(const cuda::CUuuid& u) {
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    AppendHexByte(out, static_cast<unsigned char>(u.bytes[i]));
  }
  return out;
}

// The staging ring's default size: the pinned memory a device load takes.
constexpr uint64_t kPinnedProbeBytes = 64ull << 20;

}  // namespace

void ExamineCuda(const CudaRuntimeOptions& options, const DoctorOptions& doctor,
                 DoctorReport* report) {
  report->cuda_built = true;
  report->kernel_image = cuda::UnshuffleKernelSummary();
  report->kernel_min_driver_version = kMinKernelDriverVersion;
  report->kernel_min_driver_why = cuda::UnshuffleKernelMinDriverWhy();
  report->all_devices = doctor.all_devices;
  cuda::Driver driver(options.driver_library);
  const cuda::DriverState& s = driver.State();
  report->driver_path = s.path;
  report->driver_version = s.version;
  report->problem = s.status;
  if (!s.status.ok()) return;
  if (s.device_count == 0) {
    report->no_device_reason = s.no_device_reason;
    return;
  }
  const cuda::DriverApi& api = driver.api();
  for (int i = 0; i < s.device_count; ++i) {
    DoctorDevice d;
    d.index = i;
    cuda::CUdevice dev = 0;
    Status st = driver.Check(api.DeviceGet(&dev, i), "cuDeviceGet");
    char name[256] = {};
    if (st.ok()) st = driver.Check(api.DeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
    d.name = name;
    cuda::CUuuid uuid{};
    if (st.ok()) st = driver.Check(api.DeviceGetUuid(&uuid, dev), "cuDeviceGetUuid");
    d.uuid = UuidText(uuid);
    size_t total = 0;
    if (st.ok()) st = driver.Check(api.DeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    d.memory_bytes = total;
    char bus[64] = {};
    if (st.ok()) st = driver.Check(api.DeviceGetPCIBusId(bus, sizeof(bus) - 1, dev), "cuDeviceGetPCIBusId");
    d.pci_bus_id = bus;
    if (st.ok()) {
      st = driver.Check(api.DeviceGetAttribute(&d.compute_major,
                                               cuda::kDeviceAttributeComputeCapabilityMajor, dev),
                        "cuDeviceGetAttribute");
    }
    if (st.ok()) {
      st = driver.Check(api.DeviceGetAttribute(&d.compute_minor,
                                               cuda::kDeviceAttributeComputeCapabilityMinor, dev),
                        "cuDeviceGetAttribute");
    }
    if (!st.ok()) {
      report->problem = st.WithContext("cuda:" + std::to_string(i));
      return;
    }
    report->devices.push_back(std::move(d));
  }
  // The kernel and a pinned allocation through the runtime rckpt loads with,
  // on the process's own device only: a context on another GPU costs its
  // owner memory (eight ranks running this would make 56).
  Result<std::unique_ptr<DeviceRuntime>> rt = NewCudaRuntime(options);
  if (!rt.ok()) {
    report->problem = rt.status();
    return;
  }
  int current = doctor.device;
  if (current < 0) {
    Result<int> c = (*rt)->CurrentDevice();
    if (!c.ok()) {
      report->problem = c.status().WithContext("the current device");
      return;
    }
    current = *c;
  }
  if (current >= s.device_count) {
    report->problem = Status::DeviceUnavailable(
        "the device to examine, cuda:" + std::to_string(current) + ", does not exist: " +
        std::to_string(s.device_count) + " are visible");
    return;
  }
  report->current_device = current;
  for (DoctorDevice& d : report->devices) {
    if (!doctor.all_devices && d.index != current) continue;
    d.examined = true;
    d.kernel_loads = (*rt)->CanUnshuffle(Device::Cuda(d.index), &d.kernel_note);
  }
  // A device whose primary context cannot be made (out of memory, a fault)
  // shows as a kernel that did not load for that reason; its first
  // allocation would fail the same way.
  for (const DoctorDevice& d : report->devices) {
    if (d.examined && !d.kernel_loads &&
        d.kernel_note.find("cuDevicePrimaryCtxRetain") != std::string::npos) {
      report->problem = Status::DeviceUnavailable("cuda:" + std::to_string(d.index) +
                                                  " cannot be used: " + d.kernel_note);
      return;
    }
  }
  report->pinned_probe_bytes = kPinnedProbeBytes;
  Result<void*> p = (*rt)->AllocatePinned(Device::Cuda(current), kPinnedProbeBytes);
  if (p.ok()) {
    (*rt)->FreePinned(*p);
    return;
  }
  report->pinned_probe = p.status();
  report->problem = Status::DeviceUnavailable(
      "pinned host memory cannot be had (" + p.status().message() +
      "): every load onto a GPU stages through " + std::to_string(kPinnedProbeBytes >> 20) +
      " MiB of it; free host memory, or raise the memory limit of this container or job "
      "(pinned pages count against it; the driver pins them, so ulimit -l does not bound them)");
}

}  // namespace rckpt
