#include "bridge.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <memory>

namespace rckpt::libtorch {
namespace {

// rckpt's dtypes in DType order, and torch's scalar type of each.
constexpr std::array<at::ScalarType, kNumDTypes> kScalarTypes = {
    at::kDouble,        at::kFloat,       at::kHalf,   at::kBFloat16, at::kFloat8_e4m3fn,
    at::kFloat8_e5m2,   at::kChar,        at::kShort,  at::kInt,      at::kLong,
    at::kByte,          at::kUInt16,      at::kUInt32, at::kUInt64,   at::kBool,
    at::kComplexFloat,  at::kComplexDouble};

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string TorchCountText(int count) {
  return std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s");
}

}  // namespace

Status StatusFromException(std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    return Status::OutOfMemory(prefix + Trimmed(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    std::string message = Trimmed(e.what_without_backtrace());
    const bool cuda = message.find("CUDA") != std::string::npos ||
                      message.find("cuda") != std::string::npos;
    return cuda ? Status::DeviceError(prefix + message)
                : Status::InvalidArgument(prefix + message);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(prefix + "out of host memory");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(prefix + Trimmed(e.what()));
  } catch (...) {
    return Status::InvalidArgument(prefix + "an exception that is not a std::exception");
  }
}

Result<at::ScalarType> ToScalarType(DType dtype, std::string_view name) {
  const auto i = static_cast<size_t>(dtype);
  if (i >= kScalarTypes.size()) {
    return Status::Unsupported("tensor '" + std::string(name) + "': dtype " +
                               std::to_string(i) + " has no torch scalar type");
  }
  return kScalarTypes[i];
}

Result<DType> FromScalarType(at::ScalarType type, std::string_view name) {
  for (size_t i = 0; i < kScalarTypes.size(); ++i) {
    if (kScalarTypes[i] == type) return static_cast<DType>(i);
  }
  return Status::Unsupported("tensor '" + std::string(name) + "': torch's " +
                             std::string(c10::toString(type)) +
                             " has no rckpt dtype (rckpt stores f64 f32 f16 bf16 f8_e4m3fn "
                             "f8_e5m2, signed and unsigned 8-64 bit integers, bool, c64, c128)");
}

std::string SizesText(at::IntArrayRef sizes) {
  return ShapeToString(Shape(sizes.begin(), sizes.end()));
}

Result<Device> DeviceOf(const at::Tensor& t, std::string_view name) {
  const c10::Device d = t.device();
  if (d.is_cpu()) return Device::Cpu();
  if (d.is_cuda()) return Device::Cuda(d.has_index() ? d.index() : 0);
  return Status::Unsupported("tensor '" + std::string(name) + "' is on " + d.str() +
                             "; rckpt saves and restores cpu and cuda tensors");
}

Result<Tensor> FromTorch(const at::Tensor& t, std::string_view name) {
  return Guard("tensor '" + std::string(name) + "'", [&]() -> Result<Tensor> {
    if (!t.defined()) {
      return Status::Unsupported("tensor '" + std::string(name) + "' is undefined");
    }
    if (t.layout() != at::kStrided || t.is_quantized()) {
      return Status::Unsupported("tensor '" + std::string(name) + "' is " +
                                 (t.is_quantized() ? std::string("quantized")
                                                   : "of layout " + c10::str(t.layout())) +
                                 "; rckpt stores dense tensors (save t.to_dense() or "
                                 "t.dequantize())");
    }
    RCKPT_ASSIGN_OR_RETURN(DType dtype, FromScalarType(t.scalar_type(), name));
    RCKPT_ASSIGN_OR_RETURN(Device device, DeviceOf(t, name));
    // A conjugate or negative view's memory holds the un-conjugated values.
    at::Tensor dense = t.resolve_conj().resolve_neg().contiguous();
    void* data = dense.numel() == 0 ? nullptr : dense.data_ptr();
    Shape shape(dense.sizes().begin(), dense.sizes().end());
    return Tensor::Adopt(dtype, std::move(shape), device,
                         std::make_shared<at::Tensor>(std::move(dense)), data);
  });
}

Result<at::Tensor> ToTorch(const Tensor& t, bool cuda, std::string_view name) {
  return Guard("tensor '" + std::string(name) + "'", [&]() -> Result<at::Tensor> {
    RCKPT_ASSIGN_OR_RETURN(at::ScalarType type, ToScalarType(t.dtype(), name));
    at::TensorOptions options = at::TensorOptions().dtype(type);
    if (cuda && t.device().is_cuda()) {
      options = options.device(at::kCUDA, static_cast<c10::DeviceIndex>(t.device().index));
    }
    if (t.nbytes() == 0) return at::empty(t.shape(), options);
    Tensor keep = t;
    void* data = keep.data();
    return at::from_blob(data, t.shape(), [keep = std::move(keep)](void*) {}, options);
  });
}

bool IsCudaRuntime(DeviceRuntime* runtime) {
  return (runtime != nullptr ? runtime : &DefaultRuntime())->name() == "cuda";
}

Status C10Allocator::Allocate(std::span<const Request> requests, std::vector<Tensor>* out) {
  if (!::torch::cuda::is_available()) {
    return Status::DeviceUnavailable(
        "tensor '" + std::string(requests.front().name) + "' is placed on " +
        requests.front().device.ToString() +
        " but libtorch in this process cannot use CUDA (torch::cuda::is_available() is false: "
        "a CPU-only libtorch, or torch_cuda not linked), so it cannot hold it; load with "
        "map_location cpu, or link a CUDA build of libtorch");
  }
  for (const Request& r : requests) {
    Status st = Guard("tensor '" + std::string(r.name) + "': at::empty on " +
                          r.device.ToString(),
                      [&]() -> Status {
      RCKPT_ASSIGN_OR_RETURN(at::ScalarType type, ToScalarType(r.dtype, r.name));
      const auto index = static_cast<c10::DeviceIndex>(r.device.index);
      at::Tensor t = at::empty(r.shape, at::TensorOptions().dtype(type).device(at::kCUDA, index));
      void* data = t.numel() == 0 ? nullptr : t.data_ptr();
      if (data != nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        made_[data] = t;
      }
      out->push_back(Tensor::Adopt(r.dtype, r.shape, r.device,
                                   std::make_shared<at::Tensor>(std::move(t)), data));
      return Status::Ok();
    });
    RCKPT_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

at::Tensor C10Allocator::Take(const void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(data);
  if (it == made_.end()) return at::Tensor();
  at::Tensor t = std::move(it->second);
  made_.erase(it);
  return t;
}

CallerStream C10CallerStream() {
  return [](Device d) -> Result<Stream> {
    return Guard("c10's current stream of " + d.ToString(), [&]() -> Result<Stream> {
      if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
        return Status::DeviceUnavailable(
            "libtorch in this process has no CUDA (torch_cuda not linked), so it has no "
            "stream on " + d.ToString());
      }
      const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
          ->getStream(c10::Device(c10::DeviceType::CUDA,
                                  static_cast<c10::DeviceIndex>(d.index)));
      return Stream{stream.native_handle()};
    });
  };
}

std::function<Result<int>(int)> C10AutoDevice(DeviceRuntime* runtime) {
  return [runtime](int count) -> Result<int> {
    return Guard("model_device \"auto\": c10's current device", [&]() -> Result<int> {
      const bool available = ::torch::cuda::is_available();
      const int torch_count = available ? static_cast<int>(::torch::cuda::device_count()) : 0;
      const std::string ours = "rckpt sees " + TorchCountText(count);
      if (count == 0 && torch_count > 0) {
        return Status::DeviceUnavailable(
            "model_device \"auto\": libtorch sees " + TorchCountText(torch_count) +
            " but rckpt sees none (" + runtime->NoDeviceReason() +
            "); rckpt loads the driver itself (libcuda.so.1): run `rckpt doctor` to see why, "
            "or load with map_location cpu");
      }
      if (count == 0) return -1;
      if (!available || !c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
        return Status::DeviceUnavailable(
            "model_device \"auto\": " + ours +
            " but libtorch in this process cannot use CUDA (a CPU-only libtorch, torch_cuda not "
            "linked, or CUDA_VISIBLE_DEVICES changed after it started); link a CUDA build of "
            "libtorch, or load with map_location cpu");
      }
      if (torch_count != count) {
        return Status::DeviceUnavailable(
            "model_device \"auto\": " + ours + " but libtorch sees " +
            std::to_string(torch_count) +
            " (CUDA_VISIBLE_DEVICES changed after one of them started?); run `rckpt doctor` "
            "to see rckpt's devices by UUID");
      }
      return static_cast<int>(
          c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index());
    });
  };
}

void OrderAfterC10Stream(Checkpoint* ck) {
  if (ck->caller_stream()) return;
  for (const TensorEntry& e : ck->tensors()) {
    if (e.tensor.device().is_cuda()) {
      ck->set_caller_stream(C10CallerStream());
      return;
    }
  }
}

SaveOptions WithC10Stream(SaveOptions options) {
  if (!options.caller_stream && IsCudaRuntime(options.runtime)) {
    options.caller_stream = C10CallerStream();
  }
  return options;
}

namespace {

void CollectState(const ::torch::nn::Module& module, const std::string& prefix,
                  std::vector<std::pair<std::string, at::Tensor>>* out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) out->emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) out->emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& child : module.named_children()) {
    CollectState(*child.value(), prefix + child.key() + ".", out);
  }
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> ModuleState(const ::torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  CollectState(module, "", &out);
  return out;
}

}  // namespace rckpt::libtorch
