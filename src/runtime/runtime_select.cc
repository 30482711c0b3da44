// Picks the process's default device runtime. The CUDA runtime itself lives
// in cuda/ and is compiled only when the toolkit is found; without it,
// CudaRuntime() reports Unsupported and the host runtime is the default.
#include "rckpt/runtime.h"

namespace rckpt {

#ifndef RCKPT_HAVE_CUDA
Result<DeviceRuntime*> CudaRuntime() {
  return Status::Unsupported(
      "CUDA runtime: rckpt was built without CUDA (configure with a CUDA "
      "toolkit and RCKPT_ENABLE_CUDA=AUTO or ON)");
}
#endif

DeviceRuntime& DefaultRuntime() {
  // Decided once: asking the driver for its devices is not free, and the
  // answer must not change under a running load.
  static DeviceRuntime* runtime = [] {
    Result<DeviceRuntime*> cuda = CudaRuntime();
    if (cuda.ok() && (*cuda)->DeviceCount() > 0) return *cuda;
    return &HostRuntime();
  }();
  return *runtime;
}

}  // namespace rckpt
