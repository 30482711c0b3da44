#include "from_checkpoint.h"

#include <map>

#include "convert/bytes.h"
#include "core/rng_layout.h"
#include "convert/import_common.h"
#include "errors.h"
#include "torch_api.h"
#include "torch_device.h"

namespace rckpt::python {
namespace {

nb::bytes Bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

class PyBuilder {
 public:
  PyBuilder(const Checkpoint& ck, nb::dict tensors)
      : api_(Torch()), ck_(ck), tensors_(std::move(tensors)) {}

  nb::object Convert(const Value& v) {
    switch (v.kind()) {
      case ValueKind::kNull: return nb::none();
      case ValueKind::kBool: return nb::bool_(v.as_bool());
      case ValueKind::kInt: return nb::int_(v.as_int());
      case ValueKind::kFloat: return nb::float_(v.as_float());
      case ValueKind::kString: return nb::str(v.as_string().data(), v.as_string().size());
      case ValueKind::kBytes: return Bytes(v.as_string());
      case ValueKind::kBigInt:
        return nb::handle(reinterpret_cast<PyObject*>(&PyLong_Type))
            .attr("from_bytes")(Bytes(v.as_string()), "little", nb::arg("signed") = true);
      case ValueKind::kTensorRef: {
        PyObject* t = PyDict_GetItemString(tensors_.ptr(), v.as_string().c_str());
        return t == nullptr ? nb::none() : nb::borrow(t);
      }
      case ValueKind::kRngRef: return Rng(v.as_string());
      case ValueKind::kList: {
        nb::list out;
        for (const Value& e : v.items()) out.append(Convert(e));
        return out;
      }
      case ValueKind::kTuple: return Tuple(v.items());
      case ValueKind::kSet: {
        nb::set out;
        for (const Value& e : v.items()) out.add(Convert(e));
        return out;
      }
      case ValueKind::kMap: {
        nb::dict out;
        for (const auto& [k, e] : v.entries()) {
          nb::object value = Convert(e);
          // A function reference is left out of its dict, so that
          // load_state_dict keeps the function the live object has.
          const auto* function_ref = reinterpret_cast<PyTypeObject*>(api_.function_ref_type.ptr());
          if (e.kind() == ValueKind::kObject && Py_TYPE(value.ptr()) == function_ref) continue;
          out[Convert(k)] = std::move(value);
        }
        return out;
      }
      case ValueKind::kObject: return Object(v);
    }
    return nb::none();
  }

 private:
  nb::object Tuple(const std::vector<Value>& items) {
    PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(items.size()));
    if (t == nullptr) throw nb::python_error();
    nb::object out = nb::steal(t);
    for (size_t i = 0; i < items.size(); ++i) {
      PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), Convert(items[i]).release().ptr());
    }
    return out;
  }

  nb::object Rng(const std::string& name) {
    const RngRecord* r = ck_.FindRng(name);
    if (r == nullptr) return nb::none();
    if (r->kind == RngKind::kPython) return PythonRngTuple(r->bytes);
    if (r->kind == RngKind::kTorchCpu || r->kind == RngKind::kTorchCuda) {
      // torch.set_rng_state takes a CPU uint8 tensor.
      Tensor t = ValueOrThrow(Tensor::FromBytes(
          DType::kU8, {static_cast<int64_t>(r->bytes.size())}, r->bytes));
      return TensorToTorch(std::move(t), nullptr, true);
    }
    nb::bytes bytes(r->bytes.data(), r->bytes.size());
    if (r->kind == RngKind::kNumpy) {
      // np.random.set_state() takes get_state()'s tuple, a bit generator a
      // .state dict: rckpt.rng makes them (bytes where NumPy is missing).
      return nb::module_::import_("rckpt.rng").attr("_numpy_value")(bytes);
    }
    return bytes;
  }

  // Known classes become the Python objects they were; any other class
  // becomes what rckpt._state_types.decode makes of it: a NumPy value, a
  // FunctionRef or an rckpt.InertObject (nothing is imported or executed).
  nb::object Object(const Value& v) {
    const std::string& cls = v.as_string();
    const Value& f = v.fields();
    if (cls == "torch.Size" && f.kind() == ValueKind::kTuple) {
      return api_.size_type(Convert(f));
    }
    if (cls == "torch.dtype" && f.kind() == ValueKind::kString &&
        nb::hasattr(api_.torch, f.as_string().c_str())) {
      nb::object d = api_.torch.attr(f.as_string().c_str());
      if (DTypeOfTorch(d) || nb::isinstance(d, api_.dtype_type)) return d;
    }
    if (cls == "torch.device" && f.kind() == ValueKind::kTuple) {
      try {
        return api_.device_type(*Convert(f));
      } catch (const nb::python_error&) {
        // not a device this torch knows: kept inert below
      }
    }
    if (cls == "collections.OrderedDict" && f.is_map()) {
      const Value* items = f.Find("items");
      const Value* state = f.Find("state");
      if (items != nullptr && items->is_map()) {
        nb::object od = api_.ordered_dict(Convert(*items));
        if (state != nullptr && state->is_map()) {
          for (const auto& [k, e] : state->entries()) {
            if (k.kind() == ValueKind::kString) {
              nb::setattr(od, k.as_string().c_str(), Convert(e));
            }
          }
        }
        return od;
      }
    }
    // NumPy values, function references; anything else becomes an InertObject.
    return api_.decode_object(nb::str(cls.data(), cls.size()), Convert(f));
  }

  const TorchApi& api_;
  const Checkpoint& ck_;
  nb::dict tensors_;
};

}  // namespace

namespace {

// A CUDA tensor without elements (torch gives it no memory to hand over).
nb::object EmptyCudaTensor(const Tensor& t) {
  const TorchApi& api = Torch();
  nb::list shape;
  for (int64_t d : t.shape()) shape.append(d);
  return api.torch.attr("empty")(nb::tuple(shape),
                                 nb::arg("dtype") = api.torch_dtype[static_cast<int>(t.dtype())],
                                 nb::arg("device") = api.device_type("cuda", t.device().index));
}

}  // namespace

TorchTensors TensorsToTorch(const std::vector<TensorEntry>& entries, std::shared_ptr<void> keep,
                            bool device_is_host, TorchDeviceAllocator* made) {
  TorchTensors out;
  // One str per name and per device, shared by the three dicts: this loop
  // is most of the per-tensor cost of a load from Python.
  std::map<Device, nb::str> device_names;
  auto device_name = [&](Device d) -> PyObject* {
    auto it = device_names.find(d);
    if (it == device_names.end()) it = device_names.emplace(d, nb::str(d.ToString().c_str())).first;
    return it->second.ptr();
  };
  for (const TensorEntry& e : entries) {
    nb::str name(e.name.data(), e.name.size());
    nb::object t;
    if (made != nullptr && !device_is_host && e.tensor.device().is_cuda()) {
      t = e.tensor.data() != nullptr ? made->Take(e.tensor.data()) : nb::none();
      if (t.is_none() && e.tensor.nbytes() == 0) t = EmptyCudaTensor(e.tensor);
    }
    if (!t.is_valid() || t.is_none()) t = TensorToTorch(e.tensor, keep, device_is_host);
    if (PyDict_SetItem(out.tensors.ptr(), name.ptr(), t.ptr()) != 0 ||
        PyDict_SetItem(out.placement.ptr(), name.ptr(), device_name(e.tensor.device())) != 0 ||
        PyDict_SetItem(out.origin.ptr(), name.ptr(), device_name(e.Origin())) != 0) {
      throw nb::python_error();
    }
  }
  return out;
}

nb::object TreeToPython(const Checkpoint& ck, nb::dict tensors) {
  return TreeToPython(ck.Tree(), ck, std::move(tensors));
}

nb::object TreeToPython(const Value& tree, const Checkpoint& ck, nb::dict tensors) {
  return PyBuilder(ck, std::move(tensors)).Convert(tree);
}

nb::object PythonRngTuple(std::span<const std::byte> bytes) {
  std::vector<uint32_t> words;
  bool has_gauss = false;
  double gauss = 0;
  if (!DecodePythonRng(bytes, &words, &has_gauss, &gauss)) {
    throw StatusError(Status::Corruption(
        "python RNG record: " + std::to_string(bytes.size()) + " bytes are not the " +
        std::to_string(kPythonRngBytes) + "-byte random.getstate() layout"));
  }
  PyObject* w = PyTuple_New(625);
  nb::object wt = nb::steal(w);
  for (size_t i = 0; i < 625; ++i) PyTuple_SET_ITEM(w, i, PyLong_FromUnsignedLong(words[i]));
  nb::object g = has_gauss ? nb::object(nb::float_(gauss)) : nb::none();
  return nb::make_tuple(3, wt, g);
}

nb::bytes PythonRngBytes(nb::handle state) {
  nb::tuple s = nb::cast<nb::tuple>(state);
  if (s.size() != 3 || nb::cast<int>(s[0]) != 3) {
    throw nb::value_error("random.getstate() must be a tuple (3, words, gauss)");
  }
  nb::tuple w = nb::cast<nb::tuple>(s[1]);
  if (w.size() != 625) throw nb::value_error("random.getstate() words must be 625 ints");
  std::vector<uint32_t> words;
  words.reserve(625);
  for (nb::handle x : w) words.push_back(nb::cast<uint32_t>(x));
  const bool has_gauss = !s[2].is_none();
  std::string b = EncodePythonRng(words, has_gauss, has_gauss ? nb::cast<double>(s[2]) : 0);
  return Bytes(b);
}

}  // namespace rckpt::python
