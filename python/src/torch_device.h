// Torch's side of device work: loaded CUDA tensors made by torch's caching
// allocator, and rckpt's device work ordered against torch's current stream
// of each device (options.h: DeviceAllocator, CallerStream).
//
// Thread-safety: the allocator and the caller stream are called by the
// engine on the calling thread with the GIL released; they take it once per
// call (not per tensor). Take() and the destructor need the GIL.
#ifndef RCKPT_PYTHON_SRC_TORCH_DEVICE_H_
#define RCKPT_PYTHON_SRC_TORCH_DEVICE_H_

#include <nanobind/nanobind.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "rckpt/options.h"

namespace rckpt::python {

namespace nb = nanobind;

// Allocates every device tensor of a load with torch.empty on its device, in
// one call with the GIL taken once, so the tensors live in torch's caching
// allocator on torch's current stream (freeing them never synchronises the
// device). The engine's copies wait for that stream first (CallerStream).
class TorchDeviceAllocator final : public DeviceAllocator {
 public:
  Status Allocate(std::span<const Request> requests, std::vector<Tensor>* out) override;

  // With the GIL held: the torch tensor made for the allocation at `data`
  // (handed out once), or None.
  nb::object Take(const void* data);

 private:
  std::mutex mu_;
  std::map<const void*, nb::object> made_;
};

// torch.cuda.current_stream(device).cuda_stream, taking the GIL. With
// `streams`, each torch.cuda.Stream asked for is also kept there by device
// index (to record tensors on it); it must outlive the call and be
// destroyed with the GIL held.
CallerStream TorchCallerStream(std::map<int, nb::object>* streams = nullptr);

// What model_device "auto" means to a Python caller (LoadOptions::
// auto_device): torch.cuda.current_device(), cpu when there is no GPU. An
// error (DeviceUnavailable, naming both views and the fix) when torch and
// rckpt disagree about the GPUs: torch sees some and rckpt none, rckpt sees
// some and torch cannot use CUDA, or they count differently. `runtime`
// explains rckpt's "none". Takes the GIL.
std::function<Result<int>(int)> TorchAutoDevice(DeviceRuntime* runtime);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_TORCH_DEVICE_H_
