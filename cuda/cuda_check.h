// Error handling for CUDA runtime API calls (internal to cuda/).
#ifndef RCKPT_CUDA_CUDA_CHECK_H_
#define RCKPT_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt {

// Maps a CUDA error to a Status: cudaErrorMemoryAllocation -> OutOfMemory,
// cudaErrorInvalidDevice / cudaErrorNoDevice -> DeviceUnavailable, anything
// else -> DeviceError. The message is "<what>: <cuda error name>: <text>".
inline Status CudaStatus(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  std::string msg = std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                    cudaGetErrorString(err);
  switch (err) {
    case cudaErrorMemoryAllocation:
      return Status::OutOfMemory(std::move(msg));
    case cudaErrorInvalidDevice:
    case cudaErrorNoDevice:
      return Status::DeviceUnavailable(std::move(msg));
    default:
      return Status::DeviceError(std::move(msg));
  }
}

}  // namespace rckpt

// Returns the mapped Status from the enclosing function when `expr` (a CUDA
// runtime call) does not return cudaSuccess.
#define RCKPT_CUDA_RETURN_IF_ERROR(expr)                  \
  do {                                                    \
    cudaError_t rckpt_cuda_err_ = (expr);                 \
    if (rckpt_cuda_err_ != cudaSuccess) {                 \
      return ::rckpt::CudaStatus(rckpt_cuda_err_, #expr); \
    }                                                     \
  } while (0)

#endif  // RCKPT_CUDA_CUDA_CHECK_H_
