// What the adapter's parts share: torch's exceptions as a Status, dtypes,
// devices and tensors between libtorch and rckpt, and torch's device
// handling (c10's allocator, current stream and current device) in rckpt's
// options.
#ifndef RCKPT_TORCH_BRIDGE_H_
#define RCKPT_TORCH_BRIDGE_H_

#include <torch/torch.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rckpt/options.h"
#include "rckpt/runtime.h"
#include "rckpt/torch.h"

namespace rckpt::libtorch {

// The exception being handled as a Status: OutOfMemory for an allocation,
// DeviceError for a CUDA failure, InvalidArgument for the rest, each as
// "<what>: <torch's message>". Call only inside a catch block.
Status StatusFromException(std::string_view what);

// f(), with any exception it throws returned as StatusFromException(what).
template <typename F>
auto Guard(std::string_view what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    return StatusFromException(what);
  }
}

// Between rckpt's dtypes and torch's scalar types. Unsupported, naming the
// tensor, for a type the other side lacks (quantized types, complex32, ...).
Result<at::ScalarType> ToScalarType(DType dtype, std::string_view name);
Result<DType> FromScalarType(at::ScalarType type, std::string_view name);

// "[2, 3]".
std::string SizesText(at::IntArrayRef sizes);

// The device of `t` (cpu or cuda:N); Unsupported, naming the tensor, for
// another device type (meta, mps, xpu ...).
Result<Device> DeviceOf(const at::Tensor& t, std::string_view name);

// An rckpt tensor of `t`'s elements, in row-major order, that keeps `t`'s
// memory alive: `t` itself when it is contiguous, else a contiguous copy
// (made on c10's current stream for a CUDA tensor). Unsupported, naming the
// tensor, for an undefined, sparse or quantized tensor.
Result<Tensor> FromTorch(const at::Tensor& t, std::string_view name);

// An at::Tensor over `t`'s memory, keeping it alive. `cuda`: the memory is
// CUDA memory of t's device; otherwise host memory (an emulated device's
// included), returned as a CPU tensor.
Result<at::Tensor> ToTorch(const Tensor& t, bool cuda, std::string_view name);

// Whether `runtime` (nullptr: DefaultRuntime()) is the CUDA runtime, the
// one whose device memory is torch's too.
bool IsCudaRuntime(DeviceRuntime* runtime);

// Device tensors of a load from c10's caching allocator (at::empty), on
// c10's current stream of their device.
class C10Allocator final : public DeviceAllocator {
 public:
  Status Allocate(std::span<const Request> requests, std::vector<Tensor>* out) override;

  // The at::Tensor made for the allocation at `data` (handed out once), or
  // an undefined tensor.
  at::Tensor Take(const void* data);

 private:
  std::mutex mu_;
  std::map<const void*, at::Tensor> made_;
};

// c10's current stream of a device, as the caller's stream.
CallerStream C10CallerStream();

// model_device "auto" as c10's current device; DeviceUnavailable, naming
// both counts, when `runtime` and torch disagree about the GPUs.
std::function<Result<int>(int)> C10AutoDevice(DeviceRuntime* runtime);

// `options` with c10's current stream as the caller's stream, unless it has
// one, when its runtime is the CUDA runtime.
SaveOptions WithC10Stream(SaveOptions options);

// Gives `ck` c10's current stream as its own caller stream
// (Checkpoint::caller_stream) when it holds a CUDA tensor and has none, so
// that any Save it reaches (rckpt::Save, AsyncSaver::Save, this adapter's)
// reads its CUDA tensors after the work queued on that stream.
void OrderAfterC10Stream(Checkpoint* ck);

// InvalidArgument unless `ck` can take section `section`: a checkpoint,
// a tree that is a dict of sections without that one, and no tensor of it.
Status CheckNewSection(const Checkpoint* ck, std::string_view section);

// Adds `items` to `ck` as Python's save adds a dict of tensors: each tensor
// named TensorName(section, key), sharing its memory (FromTorch), and the
// tree's entry for the section a dict key -> TensorRef; a tensor met twice
// (the same TensorImpl: tied weights) is stored once and referenced twice.
// Nothing is added on error: CheckNewSection's, FromTorch's, or
// InvalidArgument for a name the checkpoint already has.
Status AddDict(Checkpoint* ck, std::string_view section,
               const std::vector<std::pair<std::string, at::Tensor>>& items);

// The parameters and buffers of `module` and its children, by dotted name,
// in the order of Python's state_dict(): each module's parameters, then its
// buffers, then its children's. Undefined tensors (a Linear without bias)
// are left out.
std::vector<std::pair<std::string, at::Tensor>> ModuleState(const ::torch::nn::Module& module);

}  // namespace rckpt::libtorch

#endif  // RCKPT_TORCH_BRIDGE_H_
