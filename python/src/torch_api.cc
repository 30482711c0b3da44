#include "torch_api.h"

#include <array>
#include <string_view>

#include "dlpack.h"
#include "errors.h"
#include "rckpt/dtype.h"

namespace rckpt::python {
namespace {

// torch's names of the dtypes the format has.
constexpr std::array<std::pair<std::string_view, DType>, kNumDTypes> kTorchNames = {{
    {"float64", DType::kF64},     {"float32", DType::kF32},
    {"float16", DType::kF16},     {"bfloat16", DType::kBF16},
    {"float8_e4m3fn", DType::kF8E4M3FN}, {"float8_e5m2", DType::kF8E5M2},
    {"int8", DType::kI8},         {"int16", DType::kI16},
    {"int32", DType::kI32},       {"int64", DType::kI64},
    {"uint8", DType::kU8},        {"uint16", DType::kU16},
    {"uint32", DType::kU32},      {"uint64", DType::kU64},
    {"bool", DType::kBool},       {"complex64", DType::kC64},
    {"complex128", DType::kC128},
}};

TorchApi* MakeApi() {
  auto* api = new TorchApi();
  api->torch = nb::module_::import_("torch");
  api->tensor_type = api->torch.attr("Tensor");
  api->size_type = api->torch.attr("Size");
  api->dtype_type = api->torch.attr("dtype");
  api->device_type = api->torch.attr("device");
  api->strided = api->torch.attr("strided");
  api->from_dlpack = api->torch.attr("_C").attr("_from_dlpack");
  api->ordered_dict = nb::module_::import_("collections").attr("OrderedDict");
  api->inert_type = nb::module_::import_("rckpt.types").attr("InertObject");
  api->function_ref_type = nb::module_::import_("rckpt.types").attr("FunctionRef");
  nb::module_ state_types = nb::module_::import_("rckpt._state_types");
  api->encode_object = state_types.attr("encode");
  api->decode_object = state_types.attr("decode");
  // The handles above stay valid: their modules are never unloaded.
  api->ordered_dict.inc_ref();
  api->inert_type.inc_ref();
  api->function_ref_type.inc_ref();
  api->torch_dtype.assign(kNumDTypes, nb::none());
  for (const auto& [name, dtype] : kTorchNames) {
    std::string n(name);
    if (!nb::hasattr(api->torch, n.c_str())) continue;  // e.g. uint16 before torch 2.3
    nb::object d = api->torch.attr(n.c_str());
    api->dtype_of[d] = static_cast<int>(dtype);
    api->torch_dtype[static_cast<int>(dtype)] = d;
  }
  return api;
}

// How a dtype crosses DLPack. Dtypes torch's DLPack import may not know
// (bool, float8, unsigned beyond 8 bits) cross as the integer of their size
// and are reinterpreted with Tensor.view(dtype), which copies nothing.
struct DLPackType {
  DLDataType type;
  bool needs_view;
};

DLPackType DLPackTypeOf(DType d) {
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(d) * 8);
  switch (d) {
    case DType::kF64:
    case DType::kF32:
    case DType::kF16: return {{kDLFloat, bits, 1}, false};
    case DType::kBF16: return {{kDLBfloat, bits, 1}, false};
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64: return {{kDLInt, bits, 1}, false};
    case DType::kU8: return {{kDLUInt, bits, 1}, false};
    case DType::kC64:
    case DType::kC128: return {{kDLComplex, bits, 1}, false};
    case DType::kBool:
    case DType::kF8E4M3FN:
    case DType::kF8E5M2: return {{kDLUInt, 8, 1}, true};
    default: return {{kDLInt, bits, 1}, true};  // u16 u32 u64
  }
}

// What a DLPack capsule's consumer releases: the rckpt tensor (its owner
// frees the engine's buffer) and whatever that buffer depends on.
struct Holder {
  std::shared_ptr<void> keep;  // destroyed after `tensor`
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed;
};

void DeleteHolder(DLManagedTensor* self) { delete static_cast<Holder*>(self->manager_ctx); }

void CapsuleDestructor(PyObject* capsule) {
  // Consumed capsules are renamed "used_dltensor"; only an unconsumed one
  // still owns its tensor.
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

}  // namespace

std::string Str(nb::handle o) {
  PyObject* s = PyObject_Str(o.ptr());
  if (s == nullptr) throw nb::python_error();
  return nb::cast<std::string>(nb::steal(s));
}

const TorchApi& Torch() {
  static TorchApi* api = MakeApi();  // leaked: torch outlives every caller
  return *api;
}

std::optional<DType> DTypeOfTorch(nb::handle torch_dtype) {
  const TorchApi& api = Torch();
  PyObject* v = PyDict_GetItem(api.dtype_of.ptr(), torch_dtype.ptr());
  if (v == nullptr) return std::nullopt;
  return static_cast<DType>(PyLong_AsLong(v));
}

nb::object TensorToTorch(Tensor tensor, std::shared_ptr<void> keep, bool device_is_host) {
  const TorchApi& api = Torch();
  const DType dtype = tensor.dtype();
  nb::handle torch_dtype = api.torch_dtype[static_cast<int>(dtype)];
  if (torch_dtype.is_none()) {
    throw StatusError(Status::Unsupported(
        "dtype " + std::string(DTypeName(dtype)) + " has no torch dtype in torch " +
        nb::cast<std::string>(api.torch.attr("__version__"))));
  }
  const DLPackType dl = DLPackTypeOf(dtype);
  auto holder = std::make_unique<Holder>();
  holder->keep = std::move(keep);
  holder->tensor = std::move(tensor);
  const Tensor& t = holder->tensor;
  holder->shape = t.shape();
  holder->strides.assign(holder->shape.size(), 1);
  for (size_t i = holder->shape.size(); i-- > 1;) {
    holder->strides[i - 1] = holder->strides[i] * std::max<int64_t>(holder->shape[i], 1);
  }
  DLTensor& d = holder->managed.dl_tensor;
  d.data = const_cast<void*>(t.data());
  const Device dev = t.device();
  d.device = dev.is_cuda() && !device_is_host ? DLDevice{kDLCUDA, dev.index}
                                              : DLDevice{kDLCPU, 0};
  d.ndim = static_cast<int32_t>(holder->shape.size());
  d.dtype = dl.type;
  d.shape = holder->shape.data();
  d.strides = holder->strides.data();
  d.byte_offset = 0;
  holder->managed.manager_ctx = holder.get();
  holder->managed.deleter = DeleteHolder;
  DLManagedTensor* managed = &holder->managed;
  PyObject* capsule = PyCapsule_New(managed, "dltensor", CapsuleDestructor);
  if (capsule == nullptr) throw nb::python_error();
  holder.release();  // the capsule, then torch, owns it now
  nb::object out = api.from_dlpack(nb::steal(capsule));
  if (dl.needs_view) out = out.attr("view")(torch_dtype);
  return out;
}

TensorView TorchTensorView(nb::handle h, const std::string& path,
                           std::vector<nb::object>* keep_alive) {
  const TorchApi& api = Torch();
  nb::object t = nb::borrow(h);
  nb::object torch_dtype = t.attr("dtype");
  std::optional<DType> dtype = DTypeOfTorch(torch_dtype);
  if (!dtype) {
    throw nb::type_error((path + ": cannot store a tensor of dtype " +
                          Str(torch_dtype) +
                          " (quantized tensors and dtypes without an rckpt dtype are refused)")
                             .c_str());
  }
  if (!t.attr("layout").is(api.strided)) {
    throw nb::type_error((path + ": cannot store a tensor with layout " +
                          Str(t.attr("layout")) +
                          " (only dense, strided tensors)")
                             .c_str());
  }
  nb::object device = t.attr("device");
  std::string type = nb::cast<std::string>(device.attr("type"));
  TensorView v;
  v.dtype = *dtype;
  if (type == "cuda") {
    nb::object index = device.attr("index");
    v.device = Device::Cuda(index.is_none() ? 0 : nb::cast<int>(index));
  } else if (type != "cpu") {
    throw nb::type_error(
        (path + ": cannot store a tensor on device '" + type + "' (cpu and cuda only)").c_str());
  }
  if (*dtype == DType::kC64 || *dtype == DType::kC128) {
    // Conjugate and negative views are lazy flags on complex tensors; the
    // stored bytes must be the logical values.
    t = t.attr("resolve_conj")().attr("resolve_neg")();
  }
  if (!nb::cast<bool>(t.attr("is_contiguous")())) {
    t = t.attr("detach")().attr("contiguous")();
  }
  nb::object shape = t.attr("shape");
  const Py_ssize_t ndim = PyTuple_GET_SIZE(shape.ptr());
  v.shape.resize(ndim);
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    v.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
  }
  v.data = reinterpret_cast<const void*>(nb::cast<uintptr_t>(t.attr("data_ptr")()));
  if (!t.is(h)) keep_alive->push_back(std::move(t));
  return v;
}

}  // namespace rckpt::python
