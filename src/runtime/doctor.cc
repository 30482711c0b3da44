// RunDoctor: the host's side (version, environment, memory limits) here, the
// driver's in ExamineCuda.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include "rckpt/doctor.h"
#include "runtime/cuda_doctor.h"

namespace rckpt {
namespace {

uint64_t Limit(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

}  // namespace

DoctorReport RunDoctor(const CudaRuntimeOptions& options, const DoctorOptions& doctor) {
  DoctorReport r;
  r.rckpt_version = RCKPT_VERSION_STRING;
  r.driver_library = options.driver_library;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    r.cuda_visible_devices_set = true;
    r.cuda_visible_devices = v;
  }
  if (const char* v = std::getenv("CUDA_DEVICE_ORDER")) r.cuda_device_order = v;
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
    r.memlock_soft = Limit(lim.rlim_cur);
    r.memlock_hard = Limit(lim.rlim_max);
  }
  const long page = sysconf(_SC_PAGESIZE);
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long available = sysconf(_SC_AVPHYS_PAGES);
  if (page > 0 && pages > 0) r.host_memory_bytes = uint64_t(page) * uint64_t(pages);
  if (page > 0 && available > 0) r.host_memory_available = uint64_t(page) * uint64_t(available);
  ExamineCuda(options, doctor, &r);
  r.pool = DefaultRuntime().PoolStats();
  return r;
}

}  // namespace rckpt
