#include "torch_device.h"

#include "errors.h"
#include "torch_api.h"

namespace rckpt::python {
namespace {

// Owns one reference to a Python object; dropping it takes the GIL (the
// engine may release its tensors on any thread).
std::shared_ptr<void> OwnPyRef(nb::object o) {
  PyObject* p = o.release().ptr();
  return std::shared_ptr<void>(p, [](void* q) {
    nb::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(q));
  });
}

}  // namespace

Status TorchDeviceAllocator::Allocate(std::span<const Request> requests,
                                      std::vector<Tensor>* out) {
  nb::gil_scoped_acquire gil;
  try {
    const TorchApi& api = Torch();
    if (!nb::cast<bool>(api.torch.attr("cuda").attr("is_available")())) {
      return Status::DeviceUnavailable(
          "tensor '" + std::string(requests.front().name) + "' is placed on " +
          requests.front().device.ToString() +
          " but torch in this process cannot use CUDA (torch.cuda.is_available() is False), so "
          "it cannot hold it; load with map_location=\"cpu\", or install a CUDA build of torch");
    }
    nb::object empty = api.torch.attr("empty");
    nb::object device_type = api.torch.attr("device");
    for (const Request& r : requests) {
      nb::handle dtype = api.torch_dtype[static_cast<int>(r.dtype)];
      if (dtype.is_none()) {
        return Status::Unsupported("tensor '" + std::string(r.name) + "': dtype " +
                                   std::string(DTypeName(r.dtype)) + " has no torch dtype");
      }
      nb::list shape;
      for (int64_t d : r.shape) shape.append(d);
      nb::object t = empty(nb::tuple(shape), nb::arg("dtype") = dtype,
                           nb::arg("device") = device_type("cuda", r.device.index));
      void* data = reinterpret_cast<void*>(nb::cast<uintptr_t>(t.attr("data_ptr")()));
      if (data != nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        made_[data] = t;
      }
      out->push_back(Tensor::Adopt(r.dtype, r.shape, r.device, OwnPyRef(t), data));
    }
  } catch (nb::python_error& e) {
    // torch's own error (out of memory on the device, most often).
    const std::string what = TakePythonError(e);
    const bool oom = what.find("out of memory") != std::string::npos ||
                     what.find("OutOfMemoryError") != std::string::npos;
    return oom ? Status::OutOfMemory("torch.empty: " + what)
               : Status::DeviceError("torch.empty: " + what);
  }
  return Status::Ok();
}

nb::object TorchDeviceAllocator::Take(const void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(data);
  if (it == made_.end()) return nb::none();
  nb::object t = std::move(it->second);
  made_.erase(it);
  return t;
}

CallerStream TorchCallerStream(std::map<int, nb::object>* streams) {
  return [streams](Device d) -> Result<Stream> {
    nb::gil_scoped_acquire gil;
    try {
      nb::object stream = Torch().torch.attr("cuda").attr("current_stream")(d.index);
      const uintptr_t handle = nb::cast<uintptr_t>(stream.attr("cuda_stream"));
      if (streams != nullptr) (*streams)[d.index] = stream;
      return Stream{reinterpret_cast<void*>(handle)};
    } catch (nb::python_error& e) {
      const std::string what = TakePythonError(e);
      return Status::DeviceError("torch.cuda.current_stream(" + std::to_string(d.index) +
                                 "): " + what);
    }
  };
}

std::function<Result<int>(int)> TorchAutoDevice(DeviceRuntime* runtime) {
  return [runtime](int count) -> Result<int> {
    // Asked for model_device "auto" and for a bare "cuda" alike.
    const std::string what = "the current CUDA device (model_device \"auto\", \"cuda\")";
    nb::gil_scoped_acquire gil;
    try {
      nb::object cuda = Torch().torch.attr("cuda");
      const bool available = nb::cast<bool>(cuda.attr("is_available")());
      const int torch_count = available ? nb::cast<int>(cuda.attr("device_count")()) : 0;
      const std::string ours = "rckpt sees " + std::to_string(count) + " CUDA device" +
                               (count == 1 ? "" : "s");
      if (count == 0 && torch_count > 0) {
        return Status::DeviceUnavailable(
            what + ": torch sees " + std::to_string(torch_count) +
            " CUDA device(s) but rckpt sees none (" + runtime->NoDeviceReason() +
            "); rckpt loads the driver itself (libcuda.so.1): run rckpt.doctor() to see why, "
            "or load with map_location=\"cpu\"");
      }
      if (count == 0) return -1;
      if (!available) {
        return Status::DeviceUnavailable(
            what + ": " + ours +
            " but torch in this process cannot use CUDA (torch.cuda.is_available() is False: "
            "a CPU-only build of torch, or CUDA_VISIBLE_DEVICES changed after torch started); "
            "install a CUDA build of torch, or load with map_location=\"cpu\"");
      }
      if (torch_count != count) {
        return Status::DeviceUnavailable(
            what + ": " + ours + " but torch sees " + std::to_string(torch_count) +
            " (CUDA_VISIBLE_DEVICES changed after one of them started?); run rckpt.doctor() to "
            "compare them by UUID");
      }
      return nb::cast<int>(cuda.attr("current_device")());
    } catch (nb::python_error& e) {
      return Status::DeviceError(what + ": torch.cuda: " + TakePythonError(e));
    }
  };
}

}  // namespace rckpt::python
