// TensorView (non-owning) and Tensor (owning or borrowing) n-dimensional
// arrays of one dtype, contiguous in row-major order, on one Device.
//
// A tensor's bytes may live in host memory or in device memory; rckpt never
// dereferences device pointers on the host, it moves them through the device
// runtime (runtime.h).
//
// Thread-safety: values; concurrent reads of one Tensor are safe.
#ifndef RCKPT_TENSOR_H_
#define RCKPT_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "rckpt/device.h"
#include "rckpt/dtype.h"
#include "rckpt/status.h"

namespace rckpt {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a 0-d shape). Returns InvalidArgument
// on a negative dimension or when numel * DTypeSize(dtype) overflows u64.
Result<uint64_t> ShapeNumel(const Shape& shape);
Result<uint64_t> ShapeBytes(const Shape& shape, DType dtype);

// "[2, 3]" / "[]".
std::string ShapeToString(const Shape& shape);

// A view of bytes owned elsewhere. `data` may be a device pointer when
// `device` is a CUDA device. The caller keeps the bytes alive and unchanged
// for as long as the view is used (for Save: until Save returns).
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device;

  uint64_t nbytes() const;  // numel * DTypeSize; 0 for invalid shapes
};

// A tensor that owns its bytes (or shares ownership with other tensors).
// Copying a Tensor shares the bytes; use Clone-like helpers to duplicate.
class Tensor {
 public:
  Tensor() = default;

  // New zero-filled host tensor. OutOfMemory if the allocation fails,
  // InvalidArgument for a bad shape.
  static Result<Tensor> Zeros(DType dtype, Shape shape);

  // New host tensor with uninitialised contents (for callers that overwrite
  // every byte, such as a load). OutOfMemory / InvalidArgument as Zeros.
  static Result<Tensor> Empty(DType dtype, Shape shape);

  // A host tensor holding a copy of `bytes`; InvalidArgument if its size is
  // not numel * DTypeSize.
  static Result<Tensor> FromBytes(DType dtype, Shape shape,
                                  std::span<const std::byte> bytes);

  // Wraps memory the caller owns, without copying; the caller guarantees it
  // outlives every copy of the returned Tensor.
  static Tensor Borrow(const TensorView& view);

  // Adopts `data` (nbytes long, on `device`); `owner` keeps it alive and
  // frees it when the last copy of the Tensor goes (e.g. a device
  // allocation with a deleter that calls the runtime).
  static Tensor Adopt(DType dtype, Shape shape, Device device,
                      std::shared_ptr<void> owner, void* data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  uint64_t numel() const;
  uint64_t nbytes() const { return nbytes_; }
  bool defined() const { return owner_ != nullptr || nbytes_ == 0; }

  void* data() { return data_; }
  const void* data() const { return data_; }

  // Host bytes; empty span for device tensors.
  std::span<const std::byte> host_bytes() const;
  std::span<std::byte> mutable_host_bytes();

  TensorView view() const { return TensorView{data_, dtype_, shape_, device_}; }

  // Typed host access (REQUIRES: host tensor, sizeof(T) == DTypeSize).
  template <typename T>
  std::span<T> host_span() {
    return {static_cast<T*>(data_), static_cast<size_t>(nbytes_ / sizeof(T))};
  }
  template <typename T>
  std::span<const T> host_span() const {
    return {static_cast<const T*>(data_), static_cast<size_t>(nbytes_ / sizeof(T))};
  }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  Device device_;
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  uint64_t nbytes_ = 0;
};

}  // namespace rckpt

#endif  // RCKPT_TENSOR_H_
