#include "to_checkpoint.h"

#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "convert/import_common.h"
#include "errors.h"
#include "torch_api.h"
#include "util/node.h"

namespace rckpt::python {
namespace {

// Deeper nesting than this is refused (ValueError) rather than risking the
// C stack; real training state is a few levels deep.
constexpr int kMaxDepth = 200;

std::string TypeName(nb::handle o) {
  return Str(reinterpret_cast<PyObject*>(Py_TYPE(o.ptr())));
}

[[noreturn]] void CannotStore(const std::vector<std::string>& path, nb::handle o,
                              const char* what = "cannot store") {
  throw nb::type_error((convert::JoinPath(path) + ": " + what + " " + TypeName(o)).c_str());
}

// Python's int beyond int64 as little-endian two's complement bytes, the
// shortest form, as pickle's encode_long writes it.
Value BigInt(nb::handle o) {
  nb::object n = nb::borrow(o);
  const size_t bytes = nb::cast<size_t>(n.attr("bit_length")()) / 8 + 1;
  nb::bytes b = nb::cast<nb::bytes>(n.attr("to_bytes")(bytes, "little", nb::arg("signed") = true));
  return Value::BigInt(std::string(b.c_str(), b.size()));
}

class TreeBuilder {
 public:
  // `ck` nullptr: a tree without tensors. `shards` nullptr: no shards.
  // `cuda_tensors` nullptr: nobody asks for them.
  TreeBuilder(Checkpoint* ck, std::vector<nb::object>* keep_alive, ShardLeaves* shards,
              std::vector<nb::object>* cuda_tensors = nullptr)
      : api_(Torch()),
        ck_(ck),
        keep_alive_(keep_alive),
        shards_(shards),
        cuda_tensors_(cuda_tensors) {}

  void Root(nb::handle state) {
    if (!PyDict_Check(state.ptr())) {
      throw nb::type_error(("the state to save must be a dict of sections, not " +
                            TypeName(state)).c_str());
    }
    std::vector<Value::Entry> entries;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(state.ptr(), &pos, &k, &v)) {
      if (!PyUnicode_CheckExact(k)) {
        throw nb::type_error(("a section name (top-level key) must be a str, not " +
                              TypeName(k)).c_str());
      }
      section_ = nb::cast<std::string>(nb::handle(k));
      ThrowIfError(ck_->AddSection(section_, DefaultRoleForSection(section_)));
      std::vector<std::string> path{section_};
      if (std::optional<Value> value = ConvertOrDrop(v, path, 1)) {
        entries.emplace_back(Value(section_), std::move(*value));
      }
    }
    ck_->Tree() = Value::Map(std::move(entries));
  }

  Value Plain(nb::handle tree, const std::string& what) {
    std::vector<std::string> path{what};
    return ConvertOrDrop(tree, path, 1).value_or(Value());
  }

 private:
  // Convert, or nullopt for a value the save leaves out (a function, when
  // the caller asked for functions to be dropped): a dict leaves its entry
  // out, a list, tuple or set holds None in its place.
  std::optional<Value> ConvertOrDrop(nb::handle o, std::vector<std::string>& path, int depth) {
    Value v = Convert(o, path, depth);
    if (!dropped_) return v;
    dropped_ = false;
    return std::nullopt;
  }

  Value Convert(nb::handle o, std::vector<std::string>& path, int depth) {
    PyObject* p = o.ptr();
    if (PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(api_.tensor_type.ptr()))) {
      if (ck_ == nullptr) {
        throw nb::type_error((convert::JoinPath(path) +
                              ": a rank's own state cannot hold tensors (give them in the state, "
                              "as shards)").c_str());
      }
      return AddTensor(o, path);
    }
    if (shards_ != nullptr &&
        PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(shards_->type.ptr()))) {
      return AddShard(o, path);
    }
    if (PyFloat_CheckExact(p)) return Value(PyFloat_AS_DOUBLE(p));
    if (PyBool_Check(p)) return Value(p == Py_True);
    if (PyLong_CheckExact(p)) {
      int overflow = 0;
      long long i = PyLong_AsLongLongAndOverflow(p, &overflow);
      if (overflow == 0) return Value(static_cast<int64_t>(i));
      return BigInt(o);
    }
    if (p == Py_None) return Value();
    if (PyUnicode_CheckExact(p)) return Value(nb::cast<std::string>(o));
    if (PyBytes_CheckExact(p)) {
      return Value::Bytes(std::string(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p)));
    }
    if (Py_TYPE(p) == reinterpret_cast<PyTypeObject*>(api_.size_type.ptr())) {
      std::vector<Value> dims;
      for (nb::handle d : nb::borrow<nb::tuple>(o)) dims.emplace_back(nb::cast<int64_t>(d));
      return Value::Object("torch.Size", Value::Tuple(std::move(dims)));
    }
    if (PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(api_.dtype_type.ptr()))) {
      std::string name = Str(o);  // "torch.float32"
      return Value::Object("torch.dtype", Value(name.substr(name.find('.') + 1)));
    }
    if (PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(api_.device_type.ptr()))) {
      // As torch.device pickles: (type,) or (type, index).
      std::vector<Value> args{Value(nb::cast<std::string>(o.attr("type")))};
      nb::object index = o.attr("index");
      if (!index.is_none()) args.emplace_back(nb::cast<int64_t>(index));
      return Value::Object("torch.device", Value::Tuple(std::move(args)));
    }
    if (depth > kMaxDepth) {
      throw nb::value_error((convert::JoinPath(path) + ": containers nested deeper than " +
                             std::to_string(kMaxDepth) + " levels cannot be stored").c_str());
    }
    if (!in_progress_.insert(p).second) {
      throw nb::value_error(
          (convert::JoinPath(path) + ": a container that contains itself cannot be stored")
              .c_str());
    }
    Value out = Container(o, path, depth);
    in_progress_.erase(p);
    return out;
  }

  Value Container(nb::handle o, std::vector<std::string>& path, int depth) {
    PyObject* p = o.ptr();
    if (PyDict_CheckExact(p)) return Map(o, path, depth);
    if (Py_TYPE(p) == reinterpret_cast<PyTypeObject*>(api_.ordered_dict.ptr())) {
      // A state_dict carries its module versions in the OrderedDict's
      // attributes (_metadata); kept as the PyTorch importer keeps them.
      Value items = Map(o, path, depth);
      PyObject** dict_ptr = _PyObject_GetDictPtr(p);
      if (dict_ptr == nullptr || *dict_ptr == nullptr || PyDict_GET_SIZE(*dict_ptr) == 0) {
        return items;
      }
      Value state = Map(nb::handle(*dict_ptr), path, depth);
      return Value::Object("collections.OrderedDict",
                           Value::Map({{Value("items"), std::move(items)},
                                       {Value("state"), std::move(state)}}));
    }
    if (PyList_CheckExact(p) || PyTuple_CheckExact(p) || PyAnySet_CheckExact(p)) {
      if (PyFrozenSet_CheckExact(p)) CannotStore(path, o);
      std::vector<Value> items;
      items.reserve(static_cast<size_t>(PyObject_Length(p)));
      size_t i = 0;
      for (nb::handle item : o) {
        path.push_back(std::to_string(i++));
        items.push_back(ConvertOrDrop(item, path, depth + 1).value_or(Value()));
        path.pop_back();
      }
      if (PyList_CheckExact(p)) return Value::List(std::move(items));
      if (PyTuple_CheckExact(p)) return Value::Tuple(std::move(items));
      return Value::Set(std::move(items));
    }
    if (Py_TYPE(p) == reinterpret_cast<PyTypeObject*>(api_.inert_type.ptr())) {
      path.push_back("fields");
      Value fields = ConvertOrDrop(o.attr("fields"), path, depth + 1).value_or(Value());
      path.pop_back();
      return Value::Object(nb::cast<std::string>(o.attr("class_path")), std::move(fields));
    }
    return Encoded(o, path, depth);
  }

  // What the tree has no kind for (NumPy values, function references):
  // rckpt._state_types gives it a class path and fields, None for a value
  // the save leaves out, or raises the TypeError naming its path. It is
  // told whether the value sits in an LR scheduler's state, where functions
  // are kept as inert references. The fields' tensors are named by the key
  // path of the object itself, so a NumPy array's tensor is named as a
  // tensor there would be. An object met twice is stored once.
  Value Encoded(nb::handle o, std::vector<std::string>& path, int depth) {
    if (auto it = encoded_.find(o.ptr()); it != encoded_.end()) return it->second;
    nb::object encoded =
        api_.encode_object(o, convert::JoinPath(path), nb::bool_(scheduler_depth_ > 0));
    if (encoded.is_none()) {
      dropped_ = true;
      return Value();
    }
    nb::tuple r = nb::cast<nb::tuple>(encoded);
    (keep_alive_ != nullptr ? keep_alive_ : &own_keep_alive_)->push_back(r);
    nb::handle fields = r[1];
    std::vector<Value::Entry> entries;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fields.ptr(), &pos, &k, &v)) {
      Value key = Key(k, path, false);
      if (std::optional<Value> value = ConvertOrDrop(v, path, depth + 1)) {
        entries.emplace_back(std::move(key), std::move(*value));
      }
    }
    std::string class_path = nb::cast<std::string>(r[0]);
    // A function is judged where it is met (in a scheduler's state or not).
    const bool judged_by_place = class_path == "rckpt.function";
    Value out = Value::Object(std::move(class_path), Value::Map(std::move(entries)));
    if (!judged_by_place) encoded_.emplace(o.ptr(), out);
    return out;
  }

  Value Map(nb::handle d, std::vector<std::string>& path, int depth) {
    std::vector<Value::Entry> entries;
    entries.reserve(static_cast<size_t>(PyDict_Size(d.ptr())));
    const bool scheduler = IsSchedulerState(d);
    scheduler_depth_ += scheduler;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d.ptr(), &pos, &k, &v)) {
      Value key = Key(k, path, false);
      path.push_back(KeyComponent(key));
      if (std::optional<Value> value = ConvertOrDrop(v, path, depth + 1)) {
        entries.emplace_back(std::move(key), std::move(*value));
      }
      path.pop_back();
    }
    scheduler_depth_ -= scheduler;
    return Value::Map(std::move(entries));
  }

  // An LR scheduler's state_dict(): its attributes, among them base_lrs and
  // last_epoch, which every scheduler of torch.optim.lr_scheduler (and
  // SWALR) has. Functions in it are the scheduler's own (OneCycleLR's
  // anneal_func, an lr_lambda object's attributes), which the scheduler
  // built again at a restart has too: they are kept as inert references.
  static bool IsSchedulerState(nb::handle d) {
    return PyDict_GetItemString(d.ptr(), "base_lrs") != nullptr &&
           PyDict_GetItemString(d.ptr(), "last_epoch") != nullptr;
  }

  // A map key: a scalar or a tuple of scalars (docs/DESIGN.md §3, the state tree).
  Value Key(nb::handle k, const std::vector<std::string>& path, bool in_tuple) {
    PyObject* p = k.ptr();
    if (PyUnicode_CheckExact(p)) return Value(nb::cast<std::string>(k));
    if (PyBool_Check(p)) return Value(p == Py_True);
    if (PyLong_CheckExact(p)) {
      int overflow = 0;
      long long i = PyLong_AsLongLongAndOverflow(p, &overflow);
      return overflow == 0 ? Value(static_cast<int64_t>(i)) : BigInt(k);
    }
    if (PyFloat_CheckExact(p)) return Value(PyFloat_AS_DOUBLE(p));
    if (p == Py_None) return Value();
    if (PyBytes_CheckExact(p)) {
      return Value::Bytes(std::string(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p)));
    }
    if (PyTuple_CheckExact(p) && !in_tuple) {
      std::vector<Value> items;
      for (nb::handle e : k) items.push_back(Key(e, path, true));
      return Value::Tuple(std::move(items));
    }
    CannotStore(path, k, "cannot use as a dict key");
  }

  Value AddTensor(nb::handle t, const std::vector<std::string>& path) {
    // One tensor object met twice (tied weights) is stored once and comes
    // back as one object, as torch.save and the PyTorch importer do.
    if (auto it = tensors_seen_.find(t.ptr()); it != tensors_seen_.end()) {
      return Value::TensorRef(it->second);
    }
    std::vector<std::string> unused_warnings;
    std::string name = convert::UniqueName(*ck_, convert::JoinPath(path), &unused_warnings);
    if (shard_names_.count(name) != 0) TwoKeysForShard(name);
    TensorView view = TorchTensorView(t, name, keep_alive_);
    if (cuda_tensors_ != nullptr && view.device.is_cuda()) cuda_tensors_->push_back(nb::borrow(t));
    ThrowIfError(ck_->AddTensor(section_, name, view));
    tensors_seen_.emplace(t.ptr(), name);
    return Value::TensorRef(std::move(name));
  }

  Value AddShard(nb::handle s, const std::vector<std::string>& path) {
    if (auto it = tensors_seen_.find(s.ptr()); it != tensors_seen_.end()) {
      return Value::TensorRef(it->second);
    }
    std::string name = convert::JoinPath(path);
    if (ck_->FindTensor(name) != nullptr || ck_->FindRng(name) != nullptr ||
        !shard_names_.insert(name).second) {
      TwoKeysForShard(name);
    }
    ShardLeaf& leaf = shards_->leaves.emplace_back();
    leaf.section = section_;
    leaf.name = name;
    leaf.shape = nb::cast<Shape>(s.attr("shape"));
    leaf.offsets = nb::cast<Shape>(s.attr("offsets"));
    nb::object block = s.attr("block");
    leaf.block = TorchTensorView(block, name, keep_alive_);
    if (cuda_tensors_ != nullptr && leaf.block.device.is_cuda()) {
      cuda_tensors_->push_back(std::move(block));
    }
    tensors_seen_.emplace(s.ptr(), name);
    return Value::TensorRef(std::move(name));
  }

  // Whole tensors that two keys name get distinct names; a shard cannot:
  // its name is the one every rank gives that tensor.
  [[noreturn]] static void TwoKeysForShard(const std::string& name) {
    throw nb::value_error(("two keys map to the tensor name '" + name +
                           "', one of them a shard: a sharded tensor needs a name of its own")
                              .c_str());
  }

  const TorchApi& api_;
  Checkpoint* ck_;
  std::vector<nb::object>* keep_alive_;
  ShardLeaves* shards_;
  std::vector<nb::object>* cuda_tensors_;
  std::string section_;
  std::set<std::string> shard_names_;
  std::unordered_map<PyObject*, std::string> tensors_seen_;
  std::unordered_set<PyObject*> in_progress_;
  std::unordered_map<PyObject*, Value> encoded_;
  std::vector<nb::object> own_keep_alive_;  // when the caller keeps nothing alive
  int scheduler_depth_ = 0;  // how many LR scheduler states the walk is inside
  bool dropped_ = false;     // the value just converted is left out
};

void ApplyOrigin(nb::handle origin, Checkpoint* ck, ShardLeaves* shards) {
  if (origin.is_none()) return;
  std::unordered_map<std::string, Device> by_section;
  std::optional<Device> model_origin;
  auto device = [](nb::handle d, const std::string& what) {
    if (!PyUnicode_Check(d.ptr())) {
      throw nb::type_error((what + " must be a device string (\"cuda:1\"), not " +
                            nb::cast<std::string>(nb::repr(d)) + " (" + TypeName(d) + ")")
                               .c_str());
    }
    Result<Device> parsed = ParseDevice(nb::cast<std::string>(d));
    if (!parsed.ok()) {
      throw StatusError(Status::InvalidArgument(what + ": " + parsed.status().message()));
    }
    if (!parsed->is_current_cuda()) return *parsed;
    // A bare "cuda" records the device it means in this process, as a
    // load's "cuda" places onto it: torch's current device, else the
    // launcher's local rank.
    nb::object cuda = Torch().torch.attr("cuda");
    if (nb::cast<bool>(cuda.attr("is_available")())) {
      return Device::Cuda(nb::cast<int>(cuda.attr("current_device")()));
    }
    return Device::Cuda(DefaultDeviceIndex(ReadNodeFacts(), INT32_MAX));
  };
  if (PyUnicode_Check(origin.ptr())) {
    model_origin = device(origin, "origin");
  } else if (PyDict_Check(origin.ptr())) {
    for (auto [k, v] : nb::borrow<nb::dict>(origin)) {
      if (!PyUnicode_Check(k.ptr())) {
        throw nb::type_error(("origin's keys must be section names (str), not " +
                              nb::cast<std::string>(nb::repr(k))).c_str());
      }
      std::string section = nb::cast<std::string>(k);
      if (ck->FindSection(section) == nullptr) {
        throw StatusError(Status::InvalidArgument("origin names section '" + section +
                                                  "', which the state does not have"));
      }
      by_section[section] = device(v, "origin['" + section + "']");
    }
  } else {
    throw nb::type_error(("origin must be None, a device string or a dict section -> device, "
                          "not " + nb::cast<std::string>(nb::repr(origin)) + " (" +
                          TypeName(origin) + ")").c_str());
  }
  auto origin_of = [&](const std::string& section, Role role) -> std::optional<Device> {
    if (auto it = by_section.find(section); it != by_section.end()) return it->second;
    if (model_origin && role == Role::kModel) return model_origin;
    return std::nullopt;
  };
  for (TensorEntry& e : ck->mutable_tensors()) {
    if (!e.tensor.device().is_cpu()) continue;
    if (std::optional<Device> d = origin_of(e.section, e.role)) e.origin = *d;
  }
  if (shards == nullptr) return;
  for (ShardLeaf& leaf : shards->leaves) {
    if (!leaf.block.device.is_cpu()) continue;
    const Role role = DefaultRoleForTensor(leaf.section, ck->FindSection(leaf.section)->role,
                                           leaf.name, leaf.shape);
    leaf.origin = origin_of(leaf.section, role);
  }
}

}  // namespace

void BuildCheckpoint(nb::handle state, nb::handle origin, Checkpoint* ck,
                     std::vector<nb::object>* keep_alive, ShardLeaves* shards,
                     std::vector<nb::object>* cuda_tensors) {
  TreeBuilder(ck, keep_alive, shards, cuda_tensors).Root(state);
  ApplyOrigin(origin, ck, shards);
}

Value PlainTree(nb::handle tree, const std::string& what) {
  return TreeBuilder(nullptr, nullptr, nullptr).Plain(tree, what);
}

}  // namespace rckpt::python
