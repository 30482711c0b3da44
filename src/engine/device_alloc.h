// Memory for the tensors a load hands back: the caller's DeviceAllocator, or
// the runtime's own device memory.
#ifndef RCKPT_SRC_ENGINE_DEVICE_ALLOC_H_
#define RCKPT_SRC_ENGINE_DEVICE_ALLOC_H_

#include <span>
#include <vector>

#include "rckpt/options.h"
#include "rckpt/runtime.h"
#include "rckpt/tensor.h"

namespace rckpt {

// Calls `allocator` once for all `requests` and checks what it made: one
// tensor per request, of its device, dtype and shape, with memory.
// InvalidArgument naming the first misfit; the allocator's own error with
// "device_allocator" before it.
Result<std::vector<Tensor>> AllocateDeviceTensors(
    DeviceAllocator& allocator, std::span<const DeviceAllocator::Request> requests);

// A tensor of `dtype` and `shape` on `target`: host memory, or device memory
// of `runtime` freed through it when the last copy of the tensor goes (so
// the runtime must outlive it).
Result<Tensor> AllocateOnRuntime(DeviceRuntime& runtime, DType dtype, const Shape& shape,
                                 Device target);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_DEVICE_ALLOC_H_
