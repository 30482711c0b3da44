#include "engine/device_alloc.h"

#include <string>

namespace rckpt {

Result<std::vector<Tensor>> AllocateDeviceTensors(
    DeviceAllocator& allocator, std::span<const DeviceAllocator::Request> requests) {
  std::vector<Tensor> made;
  made.reserve(requests.size());
  RCKPT_RETURN_IF_ERROR(allocator.Allocate(requests, &made).WithContext("device_allocator"));
  if (made.size() != requests.size()) {
    return Status::InvalidArgument("device_allocator made " + std::to_string(made.size()) +
                                   " tensors for " + std::to_string(requests.size()) +
                                   " requests");
  }
  for (size_t i = 0; i < made.size(); ++i) {
    const DeviceAllocator::Request& r = requests[i];
    const Tensor& t = made[i];
    if (t.device() != r.device || t.dtype() != r.dtype || t.shape() != r.shape ||
        (t.data() == nullptr && t.nbytes() > 0)) {
      return Status::InvalidArgument(
          "device_allocator: tensor '" + std::string(r.name) + "' was asked for as " +
          std::string(DTypeName(r.dtype)) + " " + ShapeToString(r.shape) + " on " +
          r.device.ToString() + " and made as " + std::string(DTypeName(t.dtype())) + " " +
          ShapeToString(t.shape()) + " on " + t.device().ToString() +
          (t.data() == nullptr && t.nbytes() > 0 ? " without memory" : ""));
    }
  }
  return made;
}

Result<Tensor> AllocateOnRuntime(DeviceRuntime& runtime, DType dtype, const Shape& shape,
                                 Device target) {
  if (target.is_cpu()) return Tensor::Empty(dtype, shape);
  RCKPT_ASSIGN_OR_RETURN(uint64_t n, ShapeBytes(shape, dtype));
  RCKPT_ASSIGN_OR_RETURN(void* p, runtime.Allocate(target, n));
  DeviceRuntime* rt = &runtime;
  std::shared_ptr<void> owner(p, [rt, target](void* q) { rt->Free(target, q); });
  return Tensor::Adopt(dtype, shape, target, std::move(owner), p);
}

}  // namespace rckpt
