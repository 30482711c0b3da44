#include "device_memory.h"

#include <cstring>
#include <memory>

namespace train_demo {

using rckpt::Device;
using rckpt::Result;
using rckpt::Status;

std::span<std::byte> StateTensor::mirror_bytes() {
  if (dtype == rckpt::DType::kI64) return std::as_writable_bytes(std::span(i64));
  return std::as_writable_bytes(std::span(f32));
}

std::span<const std::byte> StateTensor::mirror_bytes() const {
  if (dtype == rckpt::DType::kI64) return std::as_bytes(std::span(i64));
  return std::as_bytes(std::span(f32));
}

DeviceMemory::~DeviceMemory() {
  for (auto& [device, stream] : streams_) runtime_->DestroyStream(device, stream);
}

Result<rckpt::Stream> DeviceMemory::StreamFor(Device device) {
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  RCKPT_ASSIGN_OR_RETURN(rckpt::Stream stream, runtime_->CreateStream(device));
  streams_.emplace(device, stream);
  return stream;
}

Status DeviceMemory::Place(StateTensor& t, Device device) {
  std::span<const std::byte> bytes = t.mirror_bytes();
  if (device.is_cpu()) {
    RCKPT_ASSIGN_OR_RETURN(t.master, rckpt::Tensor::FromBytes(t.dtype, t.shape, bytes));
    return Status::Ok();
  }
  RCKPT_ASSIGN_OR_RETURN(void* ptr, runtime_->Allocate(device, bytes.size()));
  rckpt::DeviceRuntime* runtime = runtime_;
  std::shared_ptr<void> owner(ptr, [runtime, device](void* p) { runtime->Free(device, p); });
  t.master = rckpt::Tensor::Adopt(t.dtype, t.shape, device, std::move(owner), ptr);
  return Upload(t);
}

Status DeviceMemory::Upload(StateTensor& t) {
  std::span<const std::byte> src = t.mirror_bytes();
  if (t.master.nbytes() != src.size()) {
    return Status::InvalidArgument("tensor '" + t.name + "': master holds " +
                                   std::to_string(t.master.nbytes()) +
                                   " bytes, mirror " + std::to_string(src.size()));
  }
  if (src.empty()) return Status::Ok();
  Device device = t.master.device();
  if (device.is_cpu()) {
    std::memcpy(t.master.data(), src.data(), src.size());
    return Status::Ok();
  }
  RCKPT_ASSIGN_OR_RETURN(rckpt::Stream stream, StreamFor(device));
  return runtime_->CopyToDeviceAsync(device, stream, t.master.data(), src.data(),
                                     src.size());
}

Status DeviceMemory::Download(StateTensor& t) {
  std::span<std::byte> dst = t.mirror_bytes();
  if (t.master.nbytes() != dst.size()) {
    return Status::InvalidArgument("tensor '" + t.name + "': master holds " +
                                   std::to_string(t.master.nbytes()) +
                                   " bytes, mirror " + std::to_string(dst.size()));
  }
  if (dst.empty()) return Status::Ok();
  Device device = t.master.device();
  if (device.is_cpu()) {
    std::memcpy(dst.data(), t.master.data(), dst.size());
    return Status::Ok();
  }
  RCKPT_ASSIGN_OR_RETURN(rckpt::Stream stream, StreamFor(device));
  return runtime_->CopyToHostAsync(device, stream, dst.data(), t.master.data(),
                                   dst.size());
}

Status DeviceMemory::Synchronize() {
  for (auto& [device, stream] : streams_) {
    RCKPT_RETURN_IF_ERROR(runtime_->Synchronize(device, stream));
  }
  return Status::Ok();
}

}  // namespace train_demo
