// Picks the process's default device runtime. The CUDA runtime lives in
// cuda/ and needs no CUDA toolkit to build (it loads the driver at run
// time); RCKPT_ENABLE_CUDA=OFF leaves it out, and then the functions below
// say so.
#include "rckpt/runtime.h"
#include "runtime/cuda_doctor.h"

namespace rckpt {

#ifndef RCKPT_HAVE_CUDA
namespace {
constexpr const char* kNotBuilt =
    "rckpt was built without its CUDA runtime (RCKPT_ENABLE_CUDA=OFF)";
}  // namespace

Result<std::unique_ptr<DeviceRuntime>> NewCudaRuntime(const CudaRuntimeOptions&) {
  return Status::Unsupported(std::string("CUDA runtime: ") + kNotBuilt);
}

Result<DeviceRuntime*> CudaRuntime() {
  return Status::Unsupported(std::string("CUDA runtime: ") + kNotBuilt);
}

void ExamineCuda(const CudaRuntimeOptions&, const DoctorOptions&, DoctorReport* report) {
  report->cuda_built = false;
  report->no_device_reason = kNotBuilt;
}
#endif

DeviceRuntime& DefaultRuntime() {
  // Choosing touches no driver: the CUDA runtime opens it when first asked
  // for a device.
  static DeviceRuntime* runtime = [] {
    Result<DeviceRuntime*> cuda = CudaRuntime();
    return cuda.ok() ? *cuda : &HostRuntime();
  }();
  return *runtime;
}

}  // namespace rckpt
