// The parts of torch the bindings use, looked up once: types for the state
// tree mapping, the dtype table, and DLPack hand-over of rckpt tensors.
//
// Thread-safety: call with the GIL held.
#ifndef RCKPT_PYTHON_SRC_TORCH_API_H_
#define RCKPT_PYTHON_SRC_TORCH_API_H_

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/runtime.h"
#include "rckpt/tensor.h"

namespace rckpt::python {

namespace nb = nanobind;

struct TorchApi {
  nb::object torch;
  nb::handle tensor_type;   // torch.Tensor
  nb::handle size_type;     // torch.Size
  nb::handle dtype_type;    // torch.dtype
  nb::handle device_type;   // torch.device
  nb::handle ordered_dict;  // collections.OrderedDict
  nb::handle inert_type;    // rckpt.InertObject
  nb::handle function_ref_type;  // rckpt.FunctionRef
  nb::object encode_object;  // rckpt._state_types.encode(obj, path) -> (class path, fields)
  nb::object decode_object;  // rckpt._state_types.decode(class path, fields) -> object
  nb::object strided;       // torch.strided
  nb::object from_dlpack;   // torch's DLPack consumer
  nb::dict dtype_of;        // torch dtype -> int(DType)
  std::vector<nb::object> torch_dtype;  // DType -> torch dtype or None
};

// str(o), as Python spells it.
std::string Str(nb::handle o);

// Imports torch on first use. Raises ImportError when torch is missing.
const TorchApi& Torch();

// The rckpt dtype of a torch dtype; nullopt when the format has none.
std::optional<DType> DTypeOfTorch(nb::handle torch_dtype);

// A torch.Tensor over `tensor`'s memory without copying: the returned tensor
// owns `tensor` (and `keep`, e.g. the runtime that frees device memory)
// through DLPack. Host tensors and tensors of an emulated runtime
// (`device_is_host`) come back as CPU tensors, CUDA tensors as torch CUDA
// tensors. Throws StatusError (Unsupported) for a dtype this torch lacks.
nb::object TensorToTorch(Tensor tensor, std::shared_ptr<void> keep, bool device_is_host);

// A view of a torch tensor's bytes. Non-contiguous tensors (and complex
// tensors with a pending conjugation) are made contiguous first; the copy is
// appended to `keep_alive`. Throws nb::type_error naming `path` for what
// cannot be stored (sparse, quantized, dtypes the format lacks, devices
// other than cpu and cuda).
TensorView TorchTensorView(nb::handle t, const std::string& path,
                           std::vector<nb::object>* keep_alive);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_TORCH_API_H_
