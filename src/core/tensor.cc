#include "rckpt/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "util/host_memory.h"

namespace rckpt {

Result<uint64_t> ShapeNumel(const Shape& shape) {
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return Status::InvalidArgument("shape " + ShapeToString(shape) + ": dimension " +
                                     std::to_string(i) + " is negative");
    }
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(shape[i]), &n)) {
      return Status::InvalidArgument("shape " + ShapeToString(shape) +
                                     ": element count overflows 64 bits");
    }
  }
  return n;
}

Result<uint64_t> ShapeBytes(const Shape& shape, DType dtype) {
  RCKPT_ASSIGN_OR_RETURN(uint64_t n, ShapeNumel(shape));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(DTypeSize(dtype)), &bytes)) {
    return Status::InvalidArgument("shape " + ShapeToString(shape) +
                                   ": byte size overflows 64 bits");
  }
  return bytes;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

uint64_t TensorView::nbytes() const {
  auto b = ShapeBytes(shape, dtype);
  return b.ok() ? *b : 0;
}

Result<Tensor> Tensor::Zeros(DType dtype, Shape shape) {
  RCKPT_ASSIGN_OR_RETURN(uint64_t nbytes, ShapeBytes(shape, dtype));
  if (nbytes > std::numeric_limits<size_t>::max() - 64) {
    return Status::OutOfMemory("tensor of " + std::to_string(nbytes) + " bytes");
  }
  auto mem = AllocateHostBlock(nbytes, /*zero=*/true);
  if (!mem) {
    return Status::OutOfMemory("host allocation of " + std::to_string(nbytes) +
                               " bytes failed");
  }
  void* data = mem.get();
  return Adopt(dtype, std::move(shape), Device::Cpu(), std::move(mem), data);
}

Result<Tensor> Tensor::Empty(DType dtype, Shape shape) {
  RCKPT_ASSIGN_OR_RETURN(uint64_t nbytes, ShapeBytes(shape, dtype));
  if (nbytes > std::numeric_limits<size_t>::max() - 64) {
    return Status::OutOfMemory("tensor of " + std::to_string(nbytes) + " bytes");
  }
  auto mem = AllocateHostBlock(nbytes, /*zero=*/false);
  if (!mem) {
    return Status::OutOfMemory("host allocation of " + std::to_string(nbytes) +
                               " bytes failed");
  }
  void* data = mem.get();
  return Adopt(dtype, std::move(shape), Device::Cpu(), std::move(mem), data);
}

Result<Tensor> Tensor::FromBytes(DType dtype, Shape shape,
                                 std::span<const std::byte> bytes) {
  RCKPT_ASSIGN_OR_RETURN(uint64_t nbytes, ShapeBytes(shape, dtype));
  if (nbytes != bytes.size()) {
    return Status::InvalidArgument("tensor of shape " + ShapeToString(shape) + " " +
                                   std::string(DTypeName(dtype)) + " needs " +
                                   std::to_string(nbytes) + " bytes, got " +
                                   std::to_string(bytes.size()));
  }
  auto mem = AllocateHostBlock(nbytes, /*zero=*/false);
  if (!mem) {
    return Status::OutOfMemory("host allocation of " + std::to_string(nbytes) +
                               " bytes failed");
  }
  if (nbytes) std::memcpy(mem.get(), bytes.data(), nbytes);
  void* data = mem.get();
  return Adopt(dtype, std::move(shape), Device::Cpu(), std::move(mem), data);
}

Tensor Tensor::Borrow(const TensorView& view) {
  // A no-op owner keeps defined() true without taking ownership.
  std::shared_ptr<void> owner(const_cast<void*>(view.data), [](void*) {});
  return Adopt(view.dtype, view.shape, view.device, std::move(owner),
               const_cast<void*>(view.data));
}

Tensor Tensor::Adopt(DType dtype, Shape shape, Device device,
                     std::shared_ptr<void> owner, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.nbytes_ = ShapeBytes(shape, dtype).ok() ? *ShapeBytes(shape, dtype) : 0;
  t.shape_ = std::move(shape);
  t.device_ = device;
  t.owner_ = std::move(owner);
  t.data_ = data;
  return t;
}

uint64_t Tensor::numel() const {
  auto n = ShapeNumel(shape_);
  return n.ok() ? *n : 0;
}

std::span<const std::byte> Tensor::host_bytes() const {
  if (!device_.is_cpu() || data_ == nullptr) return {};
  return {static_cast<const std::byte*>(data_), static_cast<size_t>(nbytes_)};
}

std::span<std::byte> Tensor::mutable_host_bytes() {
  if (!device_.is_cpu() || data_ == nullptr) return {};
  return {static_cast<std::byte*>(data_), static_cast<size_t>(nbytes_)};
}

}  // namespace rckpt
