// Compiles libtorch's CUDA headers, which include the toolkit's
// <cuda_runtime_api.h>, in a project that found rckpt::torch first.
#include <c10/cuda/CUDAGuard.h>

#include "rckpt/torch.h"

c10::DeviceIndex GuardedDevice(c10::DeviceIndex index) {
  c10::cuda::CUDAGuard guard(index);
  return guard.current_device().index();
}
