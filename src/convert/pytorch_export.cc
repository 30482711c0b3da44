// PyTorch export: Checkpoint -> torch.save-compatible zip archive.
#include <algorithm>
#include <map>
#include <set>

#include "io/atomic_write.h"
#include "core/rng_layout.h"
#include "convert/bytes.h"
#include "convert/import_common.h"
#include "convert/numpy_pickle.h"
#include "convert/pickle_reader.h"
#include "convert/pickle_writer.h"
#include "convert/pytorch_layout.h"
#include "convert/zip.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"

namespace rckpt {
namespace convert {
namespace {

class Exporter {
 public:
  Exporter(const Checkpoint& ck, const ExportOptions& options) : ck_(ck), options_(options) {
    // NumPy's globals as the file this checkpoint came from spelled them
    // (its reader allows them under those names), else NumPy 1's, which
    // both NumPy majors unpickle.
    auto it = ck.Metadata().find(std::string(kNumpyModuleKey));
    numpy_module_ = it != ck.Metadata().end() && it->second == kNumpy2Module ? kNumpy2Module
                                                                             : kNumpy1Module;
  }

  Status Build();
  // The pickle and the layout record; then WriteZip writes the archive.
  Status Pickle();
  Status WriteZip(WritableFile* f);
  // Parts only rckpt reads back, and what was not kept (ExportReport).
  void Report(ExportReport* report) const;

 private:
  Status Collect(const Value& v, int depth);
  Status Write(const Value& v, int depth);
  Status WriteRef(const std::string& name, bool rng);
  void WriteIntTuple(const Shape& s);
  void WriteTuple(const std::vector<Value>& items, int depth, Status* st);
  // Write(v) with `component` appended to the key path.
  Status WriteAt(const Value& v, std::string component, int depth);
  // NumPy values: numpy.ndarray and numpy.scalar objects that are as
  // rckpt.save and the importer make them (else they are inert objects).
  bool IsNumpyValue(const Value& v) const;
  Status WriteNumpyValue(const Value& v);

  const Checkpoint& ck_;
  const ExportOptions& options_;
  Value root_;
  std::set<std::string> referenced_;
  PickleWriter p_;
  std::map<std::string, uint32_t> memo_of_;  // tensor/rng name -> memo index
  std::vector<std::span<const std::byte>> records_;  // data/<i>
  // The key path of the value being written, as ImportPyTorch will name it.
  std::vector<std::string> path_;
  // Where each tensor and RNG record went: storage key, or (python records)
  // the key path of the tuple.
  std::map<std::string, std::string> tensor_key_;
  std::map<std::string, std::pair<bool, std::string>> rng_where_;  // name -> (storage?, key/path)
  std::vector<std::string> added_keys_;
  std::vector<PyTorchLayout::ArrayMeta> arrays_;
  std::map<std::string, uint32_t> numpy_memo_;  // tensor name -> memo index of its array
  std::string_view numpy_module_;
  std::vector<std::string> not_kept_;
  std::string layout_json_;
};

Status Exporter::Collect(const Value& v, int depth) {
  if (depth > 10000) return Status::InvalidArgument("export: tree nested too deeply");
  switch (v.kind()) {
    case ValueKind::kTensorRef:
      if (!ck_.FindTensor(v.as_string())) {
        return Status::InvalidArgument("export: tree references tensor '" + v.as_string() +
                                       "' that the checkpoint lacks");
      }
      referenced_.insert(v.as_string());
      return Status::Ok();
    case ValueKind::kRngRef:
      if (!ck_.FindRng(v.as_string())) {
        return Status::InvalidArgument("export: tree references RNG record '" +
                                       v.as_string() + "' that the checkpoint lacks");
      }
      referenced_.insert(v.as_string());
      return Status::Ok();
    case ValueKind::kObject:
      if (IsNumpyValue(v)) {
        if (auto name = NumpyArrayTensorName(v.fields())) referenced_.insert(*name);
        return Status::Ok();
      }
      if (!IsKnownObjectClass(v.as_string())) {
        if (options_.drop_objects) return Status::Ok();
        return Status::Unsupported("export: the tree holds an inert object of class '" +
                                   v.as_string() +
                                   "' that torch.load(weights_only=True) cannot rebuild; "
                                   "use --drop-objects to write None in its place");
      }
      return Collect(v.fields(), depth + 1);
    case ValueKind::kMap:
      for (const auto& [k, x] : v.entries()) {
        RCKPT_RETURN_IF_ERROR(Collect(k, depth + 1));
        RCKPT_RETURN_IF_ERROR(Collect(x, depth + 1));
      }
      return Status::Ok();
    default:
      for (const Value& x : v.items()) RCKPT_RETURN_IF_ERROR(Collect(x, depth + 1));
      return Status::Ok();
  }
}

Status Exporter::Build() {
  root_ = ck_.Tree();
  if (root_.is_null()) root_ = Value::Map();
  RCKPT_RETURN_IF_ERROR(Collect(root_, 0));
  std::vector<Value::Entry> extra;
  for (const TensorEntry& t : ck_.tensors()) {
    if (!referenced_.count(t.name)) extra.emplace_back(Value(t.name), Value::TensorRef(t.name));
  }
  for (const RngRecord& r : ck_.rng()) {
    if (!referenced_.count(r.name)) extra.emplace_back(Value(r.name), Value::RngRef(r.name));
  }
  if (extra.empty()) return Status::Ok();
  Value* target = nullptr;
  if (root_.is_map()) {
    target = &root_;
  } else if (root_.kind() == ValueKind::kObject &&
             root_.as_string() == "collections.OrderedDict") {
    for (auto& [k, x] : root_.fields().entries()) {
      if (k == Value("items")) target = &x;
    }
  }
  if (target == nullptr) {
    return Status::InvalidArgument(
        "export: " + std::to_string(extra.size()) + " tensors/RNG records (first: '" +
        extra[0].first.as_string() +
        "') are not referenced by the state tree and the tree is not a dict to add them to");
  }
  for (auto& e : extra) {
    if (target->FindKey(e.first)) {
      return Status::InvalidArgument("export: unreferenced tensor '" + e.first.as_string() +
                                     "' collides with a top-level key of the tree");
    }
    added_keys_.push_back(e.first.as_string());
    target->entries().push_back(std::move(e));
  }
  return Status::Ok();
}

void Exporter::WriteIntTuple(const Shape& s) {
  if (s.empty()) {
    p_.Op(')');
    return;
  }
  if (s.size() > 3) p_.Mark();
  for (int64_t d : s) p_.Int(d);
  p_.Op(s.size() == 1 ? 0x85 : s.size() == 2 ? 0x86 : s.size() == 3 ? 0x87 : 't');
}

Status Exporter::WriteRef(const std::string& name, bool rng) {
  if (auto it = memo_of_.find(name); it != memo_of_.end()) {
    p_.Get(it->second);  // tied: the same tensor object again
    return Status::Ok();
  }
  DType dtype;
  Shape shape;
  std::string location = "cpu";
  std::span<const std::byte> bytes;
  if (rng) {
    const RngRecord* r = ck_.FindRng(name);
    if (r->kind == RngKind::kNumpy && referenced_.count(name) &&
        WriteNumpyRng(p_, numpy_module_, r->bytes).ok()) {
      // NumPy's own get_state() tuple or .state dict, where the tree held
      // one (an imported file's): np.random.set_state() takes it back.
      // Records only rckpt.save holds stay uint8 tensors, which
      // torch.load(weights_only=True) reads without allowing NumPy's globals.
      memo_of_[name] = p_.Put();
      rng_where_[name] = {false, JoinPath(path_)};
      return Status::Ok();
    }
    std::vector<uint32_t> words;
    bool has_gauss;
    double gauss;
    if (r->kind == RngKind::kPython && DecodePythonRng(r->bytes, &words, &has_gauss, &gauss)) {
      // random.getstate()'s own shape, so random.setstate() takes it back.
      p_.Int(3);
      p_.Mark();
      for (uint32_t w : words) p_.Int(w);
      p_.Op('t');
      if (has_gauss) {
        p_.Float(gauss);
      } else {
        p_.None();
      }
      p_.Op(0x87);
      memo_of_[name] = p_.Put();
      rng_where_[name] = {false, JoinPath(path_)};
      return Status::Ok();
    }
    dtype = DType::kU8;
    shape = {static_cast<int64_t>(r->bytes.size())};
    bytes = r->bytes;
  } else {
    const TensorEntry* t = ck_.FindTensor(name);
    if (!t->tensor.device().is_cpu()) {
      return Status::InvalidArgument("export: tensor '" + name + "' lives on " +
                                     t->tensor.device().ToString() +
                                     "; load the checkpoint to host memory first");
    }
    dtype = t->tensor.dtype();
    shape = t->tensor.shape();
    location = t->Origin().ToString();
    bytes = t->tensor.host_bytes();
  }
  std::string_view storage = TorchStorageName(dtype);
  bool v3 = storage.empty();
  std::string key = std::to_string(records_.size());
  records_.push_back(bytes);
  if (rng) {
    rng_where_[name] = {true, key};
  } else {
    tensor_key_[name] = key;
  }
  Shape stride(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    stride[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  p_.Global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
  p_.Mark();
  p_.Mark();
  p_.Str("storage");
  if (v3) {
    p_.Global("torch.storage", "UntypedStorage");
  } else {
    p_.Global("torch", std::string(storage));
  }
  p_.Str(key);
  p_.Str(location);
  p_.Int(static_cast<int64_t>(v3 ? bytes.size() : bytes.size() / DTypeSize(dtype)));
  p_.Op('t');
  p_.Op('Q');
  p_.Int(0);
  WriteIntTuple(shape);
  WriteIntTuple(stride);
  p_.Bool(false);
  p_.Global("collections", "OrderedDict");
  p_.Op(')');
  p_.Op('R');
  if (v3) p_.Global("torch", std::string(TorchDTypeName(dtype)));
  p_.Op('t');
  p_.Op('R');
  memo_of_[name] = p_.Put();
  return Status::Ok();
}

Status Exporter::WriteAt(const Value& v, std::string component, int depth) {
  path_.push_back(std::move(component));
  Status s = Write(v, depth);
  path_.pop_back();
  return s;
}

void Exporter::WriteTuple(const std::vector<Value>& items, int depth, Status* st) {
  if (items.empty()) {
    p_.Op(')');
    return;
  }
  if (items.size() > 3) p_.Mark();
  for (size_t i = 0; i < items.size(); ++i) {
    if (st->ok()) *st = WriteAt(items[i], std::to_string(i), depth + 1);
  }
  p_.Op(items.size() == 1 ? 0x85 : items.size() == 2 ? 0x86 : items.size() == 3 ? 0x87 : 't');
}

Status Exporter::Write(const Value& v, int depth) {
  switch (v.kind()) {
    case ValueKind::kNull: p_.None(); return Status::Ok();
    case ValueKind::kBool: p_.Bool(v.as_bool()); return Status::Ok();
    case ValueKind::kInt: p_.Int(v.as_int()); return Status::Ok();
    case ValueKind::kFloat: p_.Float(v.as_float()); return Status::Ok();
    case ValueKind::kString: p_.Str(v.as_string()); return Status::Ok();
    case ValueKind::kBytes: p_.Bytes(v.as_string()); return Status::Ok();
    case ValueKind::kBigInt: p_.BigInt(v.as_string()); return Status::Ok();
    case ValueKind::kTensorRef: return WriteRef(v.as_string(), false);
    case ValueKind::kRngRef: return WriteRef(v.as_string(), true);
    case ValueKind::kList: {
      p_.Op(']');
      p_.Put();
      if (v.items().empty()) return Status::Ok();
      p_.Mark();
      for (size_t i = 0; i < v.items().size(); ++i) {
        RCKPT_RETURN_IF_ERROR(WriteAt(v.items()[i], std::to_string(i), depth + 1));
      }
      p_.Op('e');
      return Status::Ok();
    }
    case ValueKind::kTuple: {
      Status st;
      WriteTuple(v.items(), depth, &st);
      return st;
    }
    case ValueKind::kSet: {
      p_.Global("__builtin__", "set");
      p_.Op(']');
      if (!v.items().empty()) {
        p_.Mark();
        for (size_t i = 0; i < v.items().size(); ++i) {
          RCKPT_RETURN_IF_ERROR(WriteAt(v.items()[i], std::to_string(i), depth + 1));
        }
        p_.Op('e');
      }
      p_.Op(0x85);
      p_.Op('R');
      return Status::Ok();
    }
    case ValueKind::kMap: {
      p_.Op('}');
      p_.Put();
      if (v.entries().empty()) return Status::Ok();
      p_.Mark();
      for (const auto& [k, x] : v.entries()) {
        RCKPT_RETURN_IF_ERROR(Write(k, depth + 1));
        RCKPT_RETURN_IF_ERROR(WriteAt(x, KeyComponent(k), depth + 1));
      }
      p_.Op('u');
      return Status::Ok();
    }
    case ValueKind::kObject: break;
  }
  const std::string& cls = v.as_string();
  const Value& f = v.fields();
  if (IsNumpyValue(v)) return WriteNumpyValue(v);
  if (!IsKnownObjectClass(cls)) {  // Collect refused these unless dropping
    not_kept_.push_back("inert object of class '" + cls + "' at '" +
                        (path_.empty() ? std::string("(root)") : JoinPath(path_)) +
                        "' (written as None: torch.load(weights_only=True) cannot rebuild it)");
    p_.None();
    return Status::Ok();
  }
  if (cls == "torch.dtype") {
    p_.Global("torch", f.kind() == ValueKind::kString ? f.as_string() : "float32");
    return Status::Ok();
  }
  if (cls == "collections.OrderedDict") {
    p_.Global("collections", "OrderedDict");
    p_.Op(')');
    p_.Op('R');
    p_.Put();
    const Value* items = f.Find(std::string_view("items"));
    if (items != nullptr && !items->entries().empty()) {
      p_.Mark();
      for (const auto& [k, x] : items->entries()) {
        RCKPT_RETURN_IF_ERROR(Write(k, depth + 1));
        RCKPT_RETURN_IF_ERROR(WriteAt(x, KeyComponent(k), depth + 1));
      }
      p_.Op('u');
    }
    if (const Value* state = f.Find(std::string_view("state"))) {
      // The importer names a dict state's entries without a "state" component.
      RCKPT_RETURN_IF_ERROR(state->is_map() ? Write(*state, depth + 1)
                                            : WriteAt(*state, "state", depth + 1));
      p_.Op('b');
    }
    return Status::Ok();
  }
  if (cls == "torch.Size") {
    p_.Global("torch", "Size");
    RCKPT_RETURN_IF_ERROR(Write(f, depth + 1));
    p_.Op(0x85);
    p_.Op('R');
    return Status::Ok();
  }
  if (cls == "builtins.bytearray") {
    p_.Global("__builtin__", "bytearray");
    RCKPT_RETURN_IF_ERROR(Write(f, depth + 1));
    p_.Op(0x85);
    p_.Op('R');
    return Status::Ok();
  }
  // torch.device, torch.layout, builtins.complex: fields are the call's args.
  if (cls == "torch.device") p_.Global("torch", "device");
  if (cls == "torch.layout") p_.Global("torch.serialization", "_get_layout");
  if (cls == "builtins.complex") p_.Global("__builtin__", "complex");
  if (f.kind() != ValueKind::kTuple) {
    return Status::InvalidArgument("export: " + cls + " object without a tuple of arguments");
  }
  RCKPT_RETURN_IF_ERROR(Write(f, depth + 1));
  p_.Op('R');
  return Status::Ok();
}

bool Exporter::IsNumpyValue(const Value& v) const {
  if (v.as_string() == kNumpyScalarClass) return IsNumpyScalarValue(v.fields());
  if (v.as_string() != kNdarrayClass) return false;
  auto name = NumpyArrayTensorName(v.fields());
  const TensorEntry* t = name ? ck_.FindTensor(*name) : nullptr;
  return t != nullptr && CheckNumpyArrayValue(v.fields(), t->tensor).ok();
}

Status Exporter::WriteNumpyValue(const Value& v) {
  if (v.as_string() == kNumpyScalarClass) {
    WriteNumpyScalarValue(p_, numpy_module_, v.fields());
    return Status::Ok();
  }
  const std::string name = *NumpyArrayTensorName(v.fields());
  if (auto it = numpy_memo_.find(name); it != numpy_memo_.end()) {
    p_.Get(it->second);  // one array under several keys, as NumPy's pickle has it
    return Status::Ok();
  }
  const TensorEntry* t = ck_.FindTensor(name);
  if (!t->tensor.device().is_cpu()) {
    return Status::InvalidArgument("export: tensor '" + name + "' lives on " +
                                   t->tensor.device().ToString() +
                                   "; load the checkpoint to host memory first");
  }
  WriteNumpyArrayValue(p_, numpy_module_, v.fields(), t->tensor);
  numpy_memo_[name] = p_.Put();
  arrays_.push_back({JoinPath(path_), name, t->section, t->role,
                     static_cast<uint64_t>(t - ck_.tensors().data())});
  return Status::Ok();
}

Status Exporter::Pickle() {
  RCKPT_RETURN_IF_ERROR(Write(root_, 0));
  p_.Stop();
  PyTorchLayout layout;
  layout.pickle_crc32 = Crc32(AsBytes(p_.str()));
  layout.sections = ck_.sections();
  for (const TensorEntry& t : ck_.tensors()) {
    auto it = tensor_key_.find(t.name);
    if (it == tensor_key_.end()) continue;  // not written (cannot happen: Build adds them)
    layout.tensors.push_back({it->second, t.name, t.section, t.role});
  }
  for (const RngRecord& r : ck_.rng()) {
    auto it = rng_where_.find(r.name);
    if (it == rng_where_.end()) continue;
    PyTorchLayout::RngMeta m;
    m.name = r.name;
    m.kind = r.kind;
    m.origin = r.origin;
    if (it->second.first) {
      m.storage_key = it->second.second;
    } else {
      m.path = it->second.second;
    }
    layout.rng.push_back(std::move(m));
  }
  layout.arrays = arrays_;
  std::sort(layout.arrays.begin(), layout.arrays.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  layout.added_keys = added_keys_;
  layout.tree_was_null = ck_.Tree().is_null();
  layout.metadata = ck_.Metadata();
  layout_json_ = EncodePyTorchLayout(layout);
  return Status::Ok();
}

void Exporter::Report(ExportReport* report) const {
  report->not_kept.insert(report->not_kept.end(), not_kept_.begin(), not_kept_.end());
  // What torch.load does not show: RNG kinds (it sees uint8 tensors) and
  // user metadata. Sections and roles follow from the key names.
  std::vector<std::string> rng_names;
  for (const RngRecord& r : ck_.rng()) {
    auto it = rng_where_.find(r.name);
    if (it != rng_where_.end() && it->second.first) rng_names.push_back("'" + r.name + "'");
  }
  std::string parts;
  if (!rng_names.empty()) {
    std::string list;
    for (size_t i = 0; i < rng_names.size() && i < 5; ++i) list += (i ? ", " : "") + rng_names[i];
    if (rng_names.size() > 5) list += ", ...";
    parts = "the kinds and origin devices of RNG records " + list +
            " (torch.load sees uint8 tensors)";
  }
  // "rckpt." keys say how a file was written (kNumpyModuleKey): not the user's.
  const auto user_keys =
      std::count_if(ck_.Metadata().begin(), ck_.Metadata().end(),
                    [](const auto& kv) { return kv.first.rfind("rckpt.", 0) != 0; });
  if (user_keys > 0) {
    parts += std::string(parts.empty() ? "" : "; ") + "user metadata (" +
             std::to_string(user_keys) + " keys)";
  }
  if (!parts.empty()) {
    report->notes.push_back("kept in the record archive/" + std::string(kPyTorchLayoutRecord) +
                            ", which rckpt reads back and torch.load ignores: " + parts);
  }
}

Status Exporter::WriteZip(WritableFile* f) {
  ZipWriter z(f, options_.pytorch_alignment);
  RCKPT_RETURN_IF_ERROR(z.Add("archive/data.pkl", AsBytes(p_.str())));
  RCKPT_RETURN_IF_ERROR(z.Add("archive/byteorder", AsBytes("little")));
  for (size_t i = 0; i < records_.size(); ++i) {
    RCKPT_RETURN_IF_ERROR(z.Add("archive/data/" + std::to_string(i), records_[i]));
  }
  RCKPT_RETURN_IF_ERROR(z.Add("archive/version", AsBytes("3\n")));
  RCKPT_RETURN_IF_ERROR(
      z.Add("archive/" + std::string(kPyTorchLayoutRecord), AsBytes(layout_json_)));
  if (options_.pytorch_alignment != 64) {
    RCKPT_RETURN_IF_ERROR(z.Add("archive/.storage_alignment",
                                AsBytes(std::to_string(options_.pytorch_alignment))));
  }
  return z.Finish();
}

}  // namespace
}  // namespace convert

Status ExportPyTorch(const Checkpoint& ck, const std::string& path,
                     const ExportOptions& options) {
  uint32_t a = options.pytorch_alignment;
  if (a == 0 || a > 4096 || (a & (a - 1)) != 0) {
    return Status::InvalidArgument("export: pytorch_alignment " + std::to_string(a) +
                                   " is not a power of two in [1, 4096]");
  }
  convert::Exporter ex(ck, options);
  RCKPT_RETURN_IF_ERROR(ex.Build());
  RCKPT_RETURN_IF_ERROR(ex.Pickle());
  FileSystem& fs = options.fs ? *options.fs : DefaultFileSystem();
  RCKPT_RETURN_IF_ERROR(
      WriteFileAtomically(fs, path, [&](WritableFile& f) { return ex.WriteZip(&f); }));
  if (options.report != nullptr) ex.Report(options.report);
  return Status::Ok();
}

}  // namespace rckpt
