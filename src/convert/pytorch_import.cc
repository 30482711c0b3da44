// PyTorch import: torch.save zip archive -> Checkpoint.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/rng_layout.h"
#include "convert/bytes.h"
#include "convert/import_common.h"
#include "convert/numpy_pickle.h"
#include "convert/pickle_reader.h"
#include "convert/pytorch_import.h"
#include "convert/pytorch_layout.h"
#include "convert/zip.h"
#include "util/host_memory.h"
#include "util/utf8.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"

namespace rckpt {
namespace convert {
namespace {

constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

// A map key of the state tree is a scalar or a tuple of scalars.
bool IsScalarKey(const Value& k, bool in_tuple = false) {
  if (k.kind() == ValueKind::kTuple && !in_tuple) {
    for (const Value& e : k.items()) {
      if (!IsScalarKey(e, true)) return false;
    }
    return true;
  }
  return !(k.is_sequence() || k.is_map() || k.kind() == ValueKind::kObject);
}

// A dict whose keys are all scalars (or tuples of them) is a map. Any other
// dict (hippynn's GraphModule.names_dict is keyed by graph node objects)
// becomes the inert object kDictPairsClass holding a list of (key, value)
// tuples, which the state tree can hold and export drops like any object.
constexpr char kDictPairsClass[] = "rckpt.dict";

Value MapOrPairs(std::vector<Value::Entry> entries) {
  bool scalar_keys = std::all_of(entries.begin(), entries.end(),
                                 [](const Value::Entry& e) { return IsScalarKey(e.first); });
  if (scalar_keys) return Value::Map(std::move(entries));
  std::vector<Value> pairs;
  pairs.reserve(entries.size());
  for (auto& [k, v] : entries) pairs.push_back(Value::Tuple({std::move(k), std::move(v)}));
  return Value::Object(kDictPairsClass, Value::List(std::move(pairs)));
}

// A storage's bytes: in the file's mapping, or in memory of their own.
struct Storage {
  std::shared_ptr<void> owner;
  std::byte* data = nullptr;
  uint64_t size = 0;
};

Result<Device> DeviceFromTag(const std::string& tag, std::vector<std::string>* warnings) {
  if (tag == "cpu") return Device::Cpu();
  if (tag.rfind("cuda", 0) == 0) {
    auto d = ParseRecordedDevice(tag);
    if (d.ok()) return *d;
    return Status::Corruption("pytorch: storage location tag '" + Printable(tag) +
                              "' is not a valid CUDA device");
  }
  warnings->push_back("storage location '" + Printable(tag) +
                      "' has no rckpt device; recorded as cpu");
  return Device::Cpu();
}

Status CompressedRecord(const ZipEntry& e) {
  return Status::Unsupported("pytorch: record '" + Printable(e.name) +
                             "' is compressed (zip method " + std::to_string(e.method) +
                             "); torch.save writes stored records: the archive was re-zipped "
                             "by another tool, re-save it with torch.save");
}

class Importer {
 public:
  Importer(const RandomAccessFile& file, const ImportOptions& options)
      : file_(file), options_(options) {}

  Result<Checkpoint> Run(ImportReport* report);

 private:
  Status ReadRecord(const std::string& name, std::vector<std::byte>* out, bool required);
  Status CheckCrc(const ZipEntry& e, std::span<const std::byte> bytes);
  // Reads the layout record ExportPyTorch writes, if any, and checks that it
  // describes `pickle` (else a warning, and the file imports as any other).
  Status ReadLayout(std::span<const std::byte> pickle);
  // Gives the checkpoint the layout's order, tree and metadata.
  Result<Checkpoint> ApplyLayout();
  Result<Storage*> LoadStorage(const StorageRef& ref);
  Result<Tensor> Materialize(const TensorRefInfo& t, const std::string& name);
  Result<Value> Convert(PyNode* n, std::vector<std::string>& path, int depth, bool in_key);
  Result<Value> ConvertTensor(PyNode* n, const std::vector<std::string>& path, bool in_key);
  Status CheckName(const std::string& name) const;
  // An RngRef when `n` is random.getstate()'s tuple, else null.
  Result<Value> PythonRngState(const PyNode* n, const std::vector<std::string>& path);
  // An RngRef when `n` is NumPy's get_state() tuple or a bit generator's
  // state dict, else null.
  Result<Value> NumpyRngState(const PyNode* n, const std::vector<std::string>& path);
  // The RNG record of `kind` at `path` (named as the layout record says, or
  // by the path), met for the first time as `n`.
  Result<Value> AddRngAt(const PyNode* n, const std::vector<std::string>& path, RngKind kind,
                         std::string_view bytes);
  // A numpy.ndarray (its tensor named by `path`) or numpy.scalar value for
  // NumPy's array and scalar nodes; nullopt for those kept inert.
  Result<std::optional<Value>> NumpyValue(const PyNode* n, const std::vector<std::string>& path);
  // Remembers which module NumPy's globals came from (kNumpyModuleKey).
  void NoteNumpy(const std::string& class_path);

  const RandomAccessFile& file_;
  const ImportOptions& options_;
  ZipDirectory dir_;
  std::string prefix_;
  bool big_endian_ = false;
  bool root_is_map_ = false;
  bool plain_state_dict_ = false;
  uint64_t nodes_ = 0;
  Checkpoint ck_;
  std::map<std::string, Storage> storages_;
  std::unordered_map<const PyNode*, Value> tensors_seen_;
  std::unordered_set<const PyNode*> in_progress_;
  std::unordered_map<const PyNode*, std::string> first_path_;
  std::set<std::string> inert_;
  std::string numpy_module_;
  std::vector<std::string> warnings_;
  std::shared_ptr<std::byte> map_;  // the whole file, when mapped
  // The layout record, when present and describing this pickle; the
  // storages and key paths it names, each used for its first tensor only.
  std::optional<PyTorchLayout> layout_;
  std::map<std::string, const PyTorchLayout::TensorMeta*> layout_tensors_;
  std::map<std::string, const PyTorchLayout::RngMeta*> layout_rng_storage_;
  std::map<std::string, const PyTorchLayout::RngMeta*> layout_rng_path_;
  std::map<std::string, const PyTorchLayout::ArrayMeta*> layout_arrays_;
};

// What the checkpoint refuses of the layout record (a duplicate name, a
// section of two roles, an invalid RNG state) is a damaged file.
Status LayoutError(const Status& s) {
  if (s.ok()) return s;
  return Status::Corruption("pytorch: record " + std::string(kPyTorchLayoutRecord) + ": " +
                            s.message());
}

Status Importer::CheckCrc(const ZipEntry& e, std::span<const std::byte> bytes) {
  uint32_t crc = Crc32(bytes);
  if (crc == e.crc32) return Status::Ok();
  std::string msg = "pytorch: record '" + Printable(e.name) + "' CRC-32 " + std::to_string(crc) +
                    " differs from the directory's " + std::to_string(e.crc32);
  if (options_.require_crc32) return Status::Corruption(msg);
  warnings_.push_back(msg);
  return Status::Ok();
}

Status Importer::ReadRecord(const std::string& name, std::vector<std::byte>* out,
                            bool required) {
  const ZipEntry* e = dir_.Find(prefix_ + name);
  if (e == nullptr) {
    if (!required) return Status::NotFound(name);
    return Status::Corruption("pytorch: archive has no record '" + Printable(prefix_ + name) +
                              "'");
  }
  if (e->method != 0) return CompressedRecord(*e);
  out->resize(e->size);
  RCKPT_RETURN_IF_ERROR(file_.ReadAt(e->data_offset, *out));
  return CheckCrc(*e, *out);
}

Result<Storage*> Importer::LoadStorage(const StorageRef& ref) {
  auto it = storages_.find(ref.key);
  if (it != storages_.end()) return &it->second;
  uint64_t elem = ref.dtype ? DTypeSize(*ref.dtype) : 1;
  uint64_t nbytes;
  if (!MulOk(ref.numel, elem, &nbytes)) {
    return Status::Corruption("pytorch: storage '" + Printable(ref.key) + "' size overflows");
  }
  const ZipEntry* e = dir_.Find(prefix_ + "data/" + ref.key);
  if (e == nullptr) {
    return Status::Corruption("pytorch: storage '" + Printable(ref.key) + "' has no record " +
                              Printable(prefix_ + "data/" + ref.key));
  }
  if (e->size != nbytes) {
    return Status::Corruption("pytorch: record '" + Printable(e->name) + "' holds " +
                              std::to_string(e->size) + " bytes, its storage declares " +
                              std::to_string(ref.numel) + " x " + std::to_string(elem) +
                              " = " + std::to_string(nbytes));
  }
  if (e->method != 0) return CompressedRecord(*e);
  Storage s;
  s.size = e->size;
  if (map_ && e->data_offset % elem == 0) {
    // ReadZipDirectory checked that the record lies inside the file. A
    // record at an offset not aligned for its elements (a zip written by
    // another tool) is read into memory of its own instead.
    s.owner = map_;
    s.data = map_.get() + e->data_offset;
  } else {
    s.owner = AllocateHostBlock(e->size, /*zero=*/false);
    if (s.owner == nullptr) {
      return Status::OutOfMemory("pytorch: " + std::to_string(e->size) +
                                 " bytes for storage '" + Printable(ref.key) + "'");
    }
    s.data = static_cast<std::byte*>(s.owner.get());
    RCKPT_RETURN_IF_ERROR(file_.ReadAt(e->data_offset, {s.data, e->size}));
  }
  RCKPT_RETURN_IF_ERROR(CheckCrc(*e, {s.data, s.size}));
  return &storages_.emplace(ref.key, std::move(s)).first->second;
}

Result<Tensor> Importer::Materialize(const TensorRefInfo& t, const std::string& name) {
  const StorageRef& ref = t.storage->storage;
  RCKPT_ASSIGN_OR_RETURN(Storage * st, LoadStorage(ref));
  const uint64_t elem = DTypeSize(t.dtype);
  const uint64_t storage_elems = st->size / elem;
  auto bad = [&](const std::string& why) {
    return Status::Corruption("pytorch: tensor '" + Printable(name) + "' view of storage '" +
                              Printable(ref.key) + "' " + why);
  };
  if (t.size.size() != t.stride.size()) {
    return bad("has " + std::to_string(t.size.size()) + " sizes but " +
               std::to_string(t.stride.size()) + " strides");
  }
  if (t.size.size() > 64) return bad("has more than 64 dimensions");
  if (t.offset < 0) return bad("has negative offset " + std::to_string(t.offset));
  uint64_t numel = 1;
  for (size_t d = 0; d < t.size.size(); ++d) {
    if (t.size[d] < 0 || t.stride[d] < 0) {
      return bad("has negative size or stride in dimension " + std::to_string(d));
    }
    if (!MulOk(numel, static_cast<uint64_t>(t.size[d]), &numel)) return bad("numel overflows");
  }
  uint64_t nbytes;
  if (!MulOk(numel, elem, &nbytes)) return bad("byte size overflows");
  Shape shape(t.size.begin(), t.size.end());
  if (numel == 0) return Tensor::Zeros(t.dtype, shape);
  uint64_t last = static_cast<uint64_t>(t.offset);
  for (size_t d = 0; d < t.size.size(); ++d) {
    uint64_t span;
    if (!MulOk(static_cast<uint64_t>(t.size[d] - 1), static_cast<uint64_t>(t.stride[d]),
               &span) ||
        !AddOk(last, span, &last)) {
      return bad("extent overflows");
    }
  }
  if (last >= storage_elems) {
    return bad("reaches element " + std::to_string(last) + " of a storage of " +
               std::to_string(storage_elems) + " elements");
  }
  bool contiguous = true;
  uint64_t expect = 1;
  for (size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && static_cast<uint64_t>(t.stride[d]) != expect) contiguous = false;
    expect *= static_cast<uint64_t>(t.size[d]);
  }
  std::byte* base = st->data;
  if (contiguous && !big_endian_) {
    void* data = base + t.offset * elem;
    return Tensor::Adopt(t.dtype, shape, Device::Cpu(), st->owner, data);
  }
  RCKPT_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(t.dtype, shape));
  std::byte* dst = static_cast<std::byte*>(out.data());
  std::vector<int64_t> idx(t.size.size(), 0);
  for (uint64_t i = 0; i < numel; ++i) {
    uint64_t src = static_cast<uint64_t>(t.offset);
    for (size_t d = 0; d < idx.size(); ++d) src += idx[d] * t.stride[d];
    std::memcpy(dst + i * elem, base + src * elem, elem);
    if (big_endian_) {
      // Complex numbers swap each half.
      uint64_t part = (t.dtype == DType::kC64 || t.dtype == DType::kC128) ? elem / 2 : elem;
      for (uint64_t p = 0; p < elem; p += part) std::reverse(dst + i * elem + p,
                                                              dst + i * elem + p + part);
    }
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.size[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Result<Value> Importer::PythonRngState(const PyNode* n, const std::vector<std::string>& path) {
  const auto& it = n->items;
  if (it.size() != 3 || it[0]->kind != PyKind::kInt || it[0]->i != 3 ||
      it[1]->kind != PyKind::kTuple || it[1]->items.size() != 625 ||
      (it[2]->kind != PyKind::kNone && it[2]->kind != PyKind::kFloat)) {
    return Value();
  }
  std::vector<uint32_t> words;
  words.reserve(625);
  for (const PyNode* w : it[1]->items) {
    if (w->kind != PyKind::kInt || w->i < 0 || w->i > UINT32_MAX) return Value();
    words.push_back(static_cast<uint32_t>(w->i));
  }
  if (words[624] > 624) return Value();  // the MT position
  if (auto seen = tensors_seen_.find(n); seen != tensors_seen_.end()) return seen->second;
  bool has_gauss = it[2]->kind == PyKind::kFloat;
  std::string bytes = EncodePythonRng(words, has_gauss, has_gauss ? it[2]->f : 0.0);
  return AddRngAt(n, path, RngKind::kPython, bytes);
}

Result<Value> Importer::NumpyRngState(const PyNode* n, const std::vector<std::string>& path) {
  if (auto seen = tensors_seen_.find(n); seen != tensors_seen_.end()) return seen->second;
  std::string array_class;
  RCKPT_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                         ReadNumpyRng(n, JoinPath(path), &warnings_, &array_class));
  if (!bytes) return Value();
  NoteNumpy(array_class);
  return AddRngAt(n, path, RngKind::kNumpy, *bytes);
}

Result<Value> Importer::AddRngAt(const PyNode* n, const std::vector<std::string>& path,
                                 RngKind kind, std::string_view bytes) {
  std::string name;
  if (auto meta = layout_rng_path_.find(JoinPath(path)); meta != layout_rng_path_.end()) {
    name = meta->second->name;
    const Device origin = meta->second->origin;
    layout_rng_path_.erase(meta);
    RCKPT_RETURN_IF_ERROR(LayoutError(ck_.AddRng(name, kind, AsBytes(bytes), origin)));
  } else {
    name = UniqueName(ck_, JoinPath(path), &warnings_);
    RCKPT_RETURN_IF_ERROR(CheckName(name));
    RCKPT_RETURN_IF_ERROR(ck_.AddRng(name, kind, AsBytes(bytes)));
  }
  Value ref = Value::RngRef(name);
  tensors_seen_.emplace(n, ref);
  return ref;
}

void Importer::NoteNumpy(const std::string& class_path) {
  if (!numpy_module_.empty()) return;
  for (std::string_view m : {kNumpy2Module, kNumpy1Module}) {
    if (class_path.rfind(std::string(m) + ".", 0) == 0) numpy_module_ = std::string(m);
  }
}

Result<std::optional<Value>> Importer::NumpyValue(const PyNode* n,
                                                  const std::vector<std::string>& path) {
  if (auto seen = tensors_seen_.find(n); seen != tensors_seen_.end()) {
    return std::optional<Value>(seen->second);
  }
  auto where = [&](const Status& s) {
    return s.WithContext("pytorch: at '" + Printable(JoinPath(path)) + "'");
  };
  if (IsNumpyScalarNode(n)) {
    auto scalar = ReadNumpyScalar(n);
    if (!scalar.ok()) return where(scalar.status());
    if (*scalar) NoteNumpy(n->s);
    return scalar;
  }
  auto array = ReadNumpyArray(n);
  if (!array.ok()) return where(array.status());
  if (!*array) return std::optional<Value>();
  NoteNumpy(n->s);
  std::string name;
  std::string section;
  std::optional<Role> role;
  if (auto meta = layout_arrays_.find(JoinPath(path)); meta != layout_arrays_.end()) {
    name = meta->second->name;
    section = meta->second->section;
    role = meta->second->role;
    layout_arrays_.erase(meta);
  } else {
    name = UniqueName(ck_, JoinPath(path), &warnings_);
    RCKPT_RETURN_IF_ERROR(CheckName(name));
    section = SectionForPath(path, root_is_map_, plain_state_dict_, options_);
  }
  const std::string dtype = (*array)->dtype.Name();
  Status added = role ? LayoutError(ck_.AddTensor(section, name, std::move((*array)->data), *role))
                      : ck_.AddTensor(section, name, std::move((*array)->data));
  RCKPT_RETURN_IF_ERROR(added);
  Value v = Value::Object(std::string(kNdarrayClass),
                          Value::Map({{Value("dtype"), Value(dtype)},
                                      {Value("data"), Value::TensorRef(name)}}));
  tensors_seen_.emplace(n, v);
  return std::optional<Value>(std::move(v));
}

// rckpt names are UTF-8 (schema/FORMAT.md). A pickled key can hold what
// Python's decoder accepts and UTF-8 does not (lone surrogates, written with
// "surrogatepass"), or, in a damaged file, any bytes.
Status Importer::CheckName(const std::string& name) const {
  if (name.empty()) {
    // Only empty keys ("" at the top level) lead to the tensor; a checkpoint
    // names every tensor.
    return Status::Unsupported("pytorch: a tensor's key path is empty (the key \"\"), which "
                               "gives it no name; rckpt names every tensor");
  }
  if (IsValidUtf8(name)) return Status::Ok();
  return Status::Unsupported("pytorch: the key path '" + name +
                             "' is not valid UTF-8; rckpt names must be");
}

Result<Value> Importer::ConvertTensor(PyNode* n, const std::vector<std::string>& path,
                                      bool in_key) {
  if (in_key) return Status::Unsupported("pytorch: a tensor used as a dict key");
  if (auto it = tensors_seen_.find(n); it != tensors_seen_.end()) return it->second;
  const std::string& key = n->tensor.storage->storage.key;
  if (auto meta = layout_tensors_.find(key); meta != layout_tensors_.end()) {
    const PyTorchLayout::TensorMeta& m = *meta->second;
    layout_tensors_.erase(meta);
    RCKPT_ASSIGN_OR_RETURN(Tensor t, Materialize(n->tensor, m.name));
    RCKPT_ASSIGN_OR_RETURN(Device origin,
                           DeviceFromTag(n->tensor.storage->storage.location, &warnings_));
    RCKPT_RETURN_IF_ERROR(LayoutError(ck_.AddTensor(m.section, m.name, std::move(t), m.role)));
    if (origin != Device::Cpu()) ck_.mutable_tensors().back().origin = origin;
    Value ref = Value::TensorRef(m.name);
    tensors_seen_.emplace(n, ref);
    return ref;
  }
  if (auto meta = layout_rng_storage_.find(key); meta != layout_rng_storage_.end()) {
    const PyTorchLayout::RngMeta& m = *meta->second;
    layout_rng_storage_.erase(meta);
    RCKPT_ASSIGN_OR_RETURN(Tensor t, Materialize(n->tensor, m.name));
    if (t.dtype() != DType::kU8 || t.shape().size() != 1) {
      return Status::Corruption("pytorch: record " + std::string(kPyTorchLayoutRecord) +
                                " names storage '" + Printable(key) + "' as RNG record '" +
                                m.name + "', but it holds a " +
                                std::string(DTypeName(t.dtype())) + ShapeToString(t.shape()) +
                                " tensor, not uint8 bytes");
    }
    RCKPT_RETURN_IF_ERROR(LayoutError(ck_.AddRng(m.name, m.kind, t.host_bytes(), m.origin)));
    Value ref = Value::RngRef(m.name);
    tensors_seen_.emplace(n, ref);
    return ref;
  }
  std::string name = UniqueName(ck_, JoinPath(path), &warnings_);
  RCKPT_RETURN_IF_ERROR(CheckName(name));
  RCKPT_ASSIGN_OR_RETURN(Tensor t, Materialize(n->tensor, name));
  RCKPT_ASSIGN_OR_RETURN(Device origin,
                         DeviceFromTag(n->tensor.storage->storage.location, &warnings_));
  Value ref;
  std::optional<RngGuess> rng;
  if (t.dtype() == DType::kU8 && t.shape().size() == 1) {
    rng = DetectRng(path, t.nbytes(), options_, &warnings_);
  }
  if (rng) {
    Status s = ck_.AddRng(name, rng->kind, t.host_bytes(), rng->origin);
    if (s.ok()) {
      ref = Value::RngRef(name);
    } else {
      warnings_.push_back("'" + name + "' looks like an RNG state but " + s.message() +
                          "; kept as a tensor");
      rng.reset();
    }
  }
  if (!rng) {
    std::string section = SectionForPath(path, root_is_map_, plain_state_dict_, options_);
    RCKPT_RETURN_IF_ERROR(ck_.AddTensor(section, name, std::move(t)));
    if (origin != Device::Cpu()) ck_.mutable_tensors().back().origin = origin;
    ref = Value::TensorRef(name);
  }
  tensors_seen_.emplace(n, ref);
  return ref;
}

Result<Value> Importer::Convert(PyNode* n, std::vector<std::string>& path, int depth,
                                bool in_key) {
  if (++nodes_ > options_.limits.max_tree_nodes) {
    return Status::Corruption("pytorch: the pickled object expands to more than " +
                              std::to_string(options_.limits.max_tree_nodes) +
                              " tree nodes (limit)");
  }
  if (depth > static_cast<int>(options_.limits.max_nesting)) {
    return Status::Corruption("pytorch: containers nested deeper than " +
                              std::to_string(options_.limits.max_nesting) + " (limit) at '" +
                              Printable(JoinPath(path)) + "'");
  }
  switch (n->kind) {
    case PyKind::kNone: return Value();
    case PyKind::kBool: return Value(n->b);
    case PyKind::kInt: return Value(n->i);
    case PyKind::kBigInt: return Value::BigInt(n->s);
    case PyKind::kFloat: return Value(n->f);
    case PyKind::kStr: return Value(n->s);
    case PyKind::kBytes: return Value::Bytes(n->s);
    case PyKind::kTensor: return ConvertTensor(n, path, in_key);
    case PyKind::kStorage:
      return Status::Unsupported("pytorch: a bare storage (not a tensor) at '" +
                                 Printable(JoinPath(path)) + "' is not supported");
    case PyKind::kMark: return Status::Corruption("pytorch: MARK left in the object");
    case PyKind::kGlobal: {
      if (n->s.rfind("torch.", 0) == 0 && TorchDTypeFromName(n->s.substr(6))) {
        return Value::Object("torch.dtype", Value(n->s.substr(6)));
      }
      inert_.insert(n->s);
      return Value::Object(n->s, Value());
    }
    case PyKind::kKnown: {
      Value args;
      if (n->args) {
        RCKPT_ASSIGN_OR_RETURN(args, Convert(n->args, path, depth + 1, in_key));
      }
      return Value::Object(n->s, std::move(args));
    }
    default: break;
  }
  if (n->kind == PyKind::kObject && !in_key && (IsNumpyArrayNode(n) || IsNumpyScalarNode(n))) {
    RCKPT_ASSIGN_OR_RETURN(std::optional<Value> v, NumpyValue(n, path));
    if (v) return std::move(*v);
  }
  // Containers and objects met again while still being converted (a cycle,
  // e.g. graph nodes pointing at their parents), and objects met again at all
  // (shared module graphs), become a reference to where they first appeared.
  if (in_progress_.count(n) || (n->kind == PyKind::kObject && first_path_.count(n))) {
    auto it = first_path_.find(n);
    return Value::Object("rckpt.ref", Value(it == first_path_.end() ? "" : it->second));
  }
  in_progress_.insert(n);
  first_path_.emplace(n, path.empty() ? std::string() : JoinPath(path));
  struct Done {
    std::unordered_set<const PyNode*>* s;
    const PyNode* n;
    ~Done() { s->erase(n); }
  } done{&in_progress_, n};

  auto seq = [&](std::vector<PyNode*>& items, std::vector<Value>* out) -> Status {
    out->reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      path.push_back(std::to_string(i));
      auto v = Convert(items[i], path, depth + 1, in_key);
      path.pop_back();
      if (!v.ok()) return v.status();
      out->push_back(std::move(v).value());
    }
    return Status::Ok();
  };
  auto map = [&](PyNode* d, std::vector<Value::Entry>* out) -> Status {
    out->reserve(d->entries.size());
    for (auto& [k, v] : d->entries) {
      RCKPT_ASSIGN_OR_RETURN(Value key, Convert(k, path, depth + 1, true));
      path.push_back(KeyComponent(key));
      auto value = Convert(v, path, depth + 1, in_key);
      path.pop_back();
      if (!value.ok()) return value.status();
      out->emplace_back(std::move(key), std::move(value).value());
    }
    return Status::Ok();
  };
  // Converts `field` as a named field of an object; dict-valued state
  // (an object's __dict__) adds no path component.
  auto field = [&](PyNode* f, const char* label, bool transparent_dict) -> Result<Value> {
    bool transparent = transparent_dict && f->kind == PyKind::kDict;
    if (!transparent) path.push_back(label);
    auto v = Convert(f, path, depth + 1, in_key);
    if (!transparent) path.pop_back();
    return v;
  };

  if (n->kind == PyKind::kTuple && !in_key) {
    auto rng = PythonRngState(n, path);
    if (!rng.ok() || !rng->is_null()) return rng;
  }
  if ((n->kind == PyKind::kTuple || n->kind == PyKind::kDict) && !in_key) {
    auto rng = NumpyRngState(n, path);
    if (!rng.ok() || !rng->is_null()) return rng;
  }
  switch (n->kind) {
    case PyKind::kList:
    case PyKind::kTuple:
    case PyKind::kSet: {
      std::vector<Value> items;
      RCKPT_RETURN_IF_ERROR(seq(n->items, &items));
      if (n->kind == PyKind::kList) return Value::List(std::move(items));
      if (n->kind == PyKind::kTuple) return Value::Tuple(std::move(items));
      return Value::Set(std::move(items));
    }
    case PyKind::kDict: {
      std::vector<Value::Entry> entries;
      RCKPT_RETURN_IF_ERROR(map(n, &entries));
      Value m = MapOrPairs(std::move(entries));
      if (n->state == nullptr) return m;
      RCKPT_ASSIGN_OR_RETURN(Value state, field(n->state, "state", true));
      return Value::Object("collections.OrderedDict",
                           Value::Map({{Value("items"), std::move(m)},
                                       {Value("state"), std::move(state)}}));
    }
    case PyKind::kObject: {
      inert_.insert(n->s);
      std::vector<Value::Entry> fields;
      if (n->args && !(n->args->kind == PyKind::kTuple && n->args->items.empty())) {
        RCKPT_ASSIGN_OR_RETURN(Value a, field(n->args, "args", false));
        fields.emplace_back(Value("args"), std::move(a));
      }
      if (n->state) {
        RCKPT_ASSIGN_OR_RETURN(Value s, field(n->state, "state", true));
        fields.emplace_back(Value("state"), std::move(s));
      }
      if (!n->entries.empty()) {
        std::vector<Value::Entry> entries;
        RCKPT_RETURN_IF_ERROR(map(n, &entries));
        fields.emplace_back(Value("items"), MapOrPairs(std::move(entries)));
      }
      if (!n->items.empty()) {
        std::vector<Value> items;
        RCKPT_RETURN_IF_ERROR(seq(n->items, &items));
        fields.emplace_back(Value("list"), Value::List(std::move(items)));
      }
      return Value::Object(n->s, Value::Map(std::move(fields)));
    }
    default:
      return Status::Corruption("pytorch: unexpected node kind in the object graph");
  }
}

Result<Checkpoint> Importer::Run(ImportReport* report) {
  uint64_t size = file_.Size();
  std::string head(std::min<uint64_t>(size, 512), '\0');
  RCKPT_RETURN_IF_ERROR(file_.ReadAt(0, {reinterpret_cast<std::byte*>(head.data()), head.size()}));
  if (head.rfind("PK\x03\x04", 0) != 0) {
    if (head.rfind(std::string(kLegacyMagic, sizeof(kLegacyMagic) - 1), 0) == 0) {
      return Status::Unsupported(
          "pytorch: this is a pre-1.6 PyTorch legacy (non-zip) checkpoint; re-save it with "
          "torch >= 1.6: torch.save(torch.load(f, weights_only=False), f2)");
    }
    if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) {
      return Status::Unsupported(
          "pytorch: this is a tar-format torch checkpoint (torch < 0.1.10); re-save it with "
          "a current torch: torch.save(torch.load(f, weights_only=False), f2)");
    }
    if (head.rfind("PYTORCH1", 0) == 0) {
      return Status::Unsupported(
          "pytorch: this is the unsupported pre-1.0 preview archive format; re-save it with "
          "a current torch");
    }
    if (head.rfind("version https://git-lfs", 0) == 0) {
      return Status::Corruption(
          "pytorch: this is a Git LFS pointer file, not the checkpoint (run 'git lfs pull')");
    }
    return Status::Corruption("pytorch: not a torch.save zip archive (no 'PK\\x03\\x04' "
                              "local header at offset 0)");
  }
  RCKPT_ASSIGN_OR_RETURN(dir_, ReadZipDirectory(file_));
  if (dir_.entries.empty()) return Status::Corruption("pytorch: the archive is empty");
  const std::string& first = dir_.entries[0].name;
  size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0) {
    return Status::Corruption("pytorch: archive entry '" + Printable(first) +
                              "' is not in a top folder");
  }
  prefix_ = first.substr(0, slash + 1);
  bool torchscript = false;
  for (const ZipEntry& e : dir_.entries) {
    if (e.name.rfind(prefix_, 0) != 0) {
      return Status::Corruption("pytorch: archive entry '" + Printable(e.name) +
                                "' is outside the top folder '" + Printable(prefix_) + "'");
    }
    std::string rel = e.name.substr(prefix_.size());
    if (rel == "constants.pkl" || rel.rfind("code/", 0) == 0) torchscript = true;
  }
  if (torchscript) {
    return Status::Unsupported(
        "pytorch: this is a TorchScript archive (torch.jit.save: constants.pkl / code/); "
        "rckpt imports torch.save checkpoints only. Save the weights with "
        "torch.save(torch.jit.load(f).state_dict(), f2)");
  }
  std::vector<std::byte> rec;
  if (ReadRecord("byteorder", &rec, false).ok()) {
    std::string_view bo = AsChars(rec);
    if (bo == "big") {
      big_endian_ = true;
    } else if (bo != "little") {
      return Status::Corruption("pytorch: record 'byteorder' is '" + Printable(bo) +
                                "', expected 'little' or 'big'");
    }
  }
  for (const char* vname : {"version", ".data/version"}) {
    if (ReadRecord(vname, &rec, false).ok()) {
      std::string v(AsChars(rec));
      while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 10) {
        return Status::Unsupported("pytorch: archive version '" + Printable(v) +
                                   "' is outside the supported range 1..10");
      }
      break;
    }
  }
  if (options_.map_file) {
    // Storages then point into the mapping; where the file cannot be
    // mapped, each is read into memory of its own.
    auto mapped = file_.MapPrivate();
    if (mapped.ok()) map_ = std::move(mapped).value();
  }
  const ZipEntry* pkl = dir_.Find(prefix_ + "data.pkl");
  if (pkl == nullptr) {
    return Status::Corruption("pytorch: archive has no '" + Printable(prefix_) +
                              "data.pkl' record");
  }
  if (pkl->size > options_.limits.max_pickle_bytes) {
    return Status::Corruption("pytorch: data.pkl of " + std::to_string(pkl->size) +
                              " bytes exceeds the limit of " +
                              std::to_string(options_.limits.max_pickle_bytes));
  }
  RCKPT_RETURN_IF_ERROR(ReadRecord("data.pkl", &rec, true));
  RCKPT_RETURN_IF_ERROR(ReadLayout(rec));
  RCKPT_ASSIGN_OR_RETURN(PickleResult pr, Unpickle(rec, options_.limits, options_.strict));
  warnings_.insert(warnings_.end(), pr.warnings.begin(), pr.warnings.end());
  PyNode* root = pr.root;
  if (root->kind == PyKind::kDict) {
    root_is_map_ = true;
    plain_state_dict_ = !root->entries.empty();
    for (auto& [k, v] : root->entries) {
      if (v->kind != PyKind::kTensor) plain_state_dict_ = false;
    }
  }
  std::vector<std::string> path;
  RCKPT_ASSIGN_OR_RETURN(ck_.Tree(), Convert(root, path, 0, false));
  if (options_.strict && !inert_.empty()) {
    std::string list;
    for (const std::string& c : inert_) list += (list.empty() ? "" : ", ") + c;
    return Status::Unsupported("pytorch: strict import refuses classes outside the "
                               "recognised set: " + list);
  }
  Checkpoint out;
  if (layout_) {
    RCKPT_ASSIGN_OR_RETURN(out, ApplyLayout());
  } else {
    if (!numpy_module_.empty()) ck_.Metadata()[std::string(kNumpyModuleKey)] = numpy_module_;
    out = std::move(ck_);
  }
  if (report != nullptr) {
    report->format = "pytorch";
    report->inert_classes.assign(inert_.begin(), inert_.end());
    report->warnings.insert(report->warnings.end(), warnings_.begin(), warnings_.end());
    if (!layout_) {
      // torch.save records the tree and the location tags; sections, roles
      // and RNG kinds follow from key names, and there is no metadata.
      report->recorded.sections = false;
      report->recorded.rng_kinds = false;
      report->recorded.metadata = false;
    }
  }
  return out;
}

Status Importer::ReadLayout(std::span<const std::byte> pickle) {
  const std::string record(kPyTorchLayoutRecord);
  const ZipEntry* e = dir_.Find(prefix_ + record);
  if (e == nullptr) return Status::Ok();
  if (e->size > options_.limits.max_pickle_bytes) {
    return Status::Corruption("pytorch: record " + record + " of " + std::to_string(e->size) +
                              " bytes exceeds the limit of " +
                              std::to_string(options_.limits.max_pickle_bytes) +
                              " (max_pickle_bytes)");
  }
  std::vector<std::byte> bytes;
  RCKPT_RETURN_IF_ERROR(ReadRecord(record, &bytes, true));
  auto layout = DecodePyTorchLayout(AsChars(bytes));
  if (!layout.ok()) {
    warnings_.push_back(layout.status().message() + "; ignored: the file is imported as "
                        "torch.save wrote it, without rckpt's sections, roles, RNG kinds and "
                        "metadata");
    return Status::Ok();
  }
  if (layout->pickle_crc32 != Crc32(pickle)) {
    warnings_.push_back("pytorch: record " + record +
                        " describes another data.pkl (its CRC-32 differs: the pickle was "
                        "rewritten by a tool other than rckpt); ignored: the file is imported "
                        "as torch.save wrote it, without rckpt's sections, roles, RNG kinds and "
                        "metadata");
    return Status::Ok();
  }
  layout_ = std::move(layout).value();
  for (const SectionInfo& sec : layout_->sections) {
    RCKPT_RETURN_IF_ERROR(LayoutError(ck_.AddSection(sec.name, sec.role)));
  }
  // Each storage and path names one entry: a second would never be met in
  // the pickle, and ApplyLayout would look for what the import never made.
  auto twice = [&](const std::string& what, const std::string& name) {
    return Status::Corruption("pytorch: record " + record + " names " + what +
                              " twice (again for '" + name + "')");
  };
  for (const auto& t : layout_->tensors) {
    if (!layout_tensors_.emplace(t.storage_key, &t).second) {
      return twice("storage " + t.storage_key, t.name);
    }
  }
  for (const auto& a : layout_->arrays) {
    if (!layout_arrays_.emplace(a.path, &a).second) {
      return twice("the path '" + a.path + "'", a.name);
    }
  }
  for (const auto& r : layout_->rng) {
    const bool fresh = r.storage_key ? layout_rng_storage_.emplace(*r.storage_key, &r).second
                                     : layout_rng_path_.emplace(r.path, &r).second;
    if (!fresh) {
      return twice(r.storage_key ? "storage " + *r.storage_key : "the path '" + r.path + "'",
                   r.name);
    }
  }
  return Status::Ok();
}

Result<Checkpoint> Importer::ApplyLayout() {
  const std::string where = "pytorch: record " + std::string(kPyTorchLayoutRecord);
  if (!layout_tensors_.empty() || !layout_rng_storage_.empty() || !layout_rng_path_.empty() ||
      !layout_arrays_.empty()) {
    std::string missing = !layout_tensors_.empty() ? layout_tensors_.begin()->second->name
                          : !layout_arrays_.empty() ? layout_arrays_.begin()->second->name
                          : !layout_rng_storage_.empty()
                              ? layout_rng_storage_.begin()->second->name
                              : layout_rng_path_.begin()->second->name;
    return Status::Corruption(where + " names '" + missing +
                              "', which the pickle does not hold where the record says");
  }
  // The keys the export added for entries the tree did not reference.
  Value& tree = ck_.Tree();
  Value* top = tree.is_map() ? &tree : nullptr;
  if (tree.kind() == ValueKind::kObject && tree.as_string() == "collections.OrderedDict") {
    top = tree.fields().Find("items");
  }
  for (const std::string& key : layout_->added_keys) {
    auto is_added = [&](const Value::Entry& e) {
      return e.first == Value(key) &&
             (e.second.kind() == ValueKind::kTensorRef || e.second.kind() == ValueKind::kRngRef) &&
             e.second.as_string() == key;
    };
    auto it = top == nullptr ? std::vector<Value::Entry>::iterator()
                             : std::find_if(top->entries().begin(), top->entries().end(), is_added);
    if (top == nullptr || it == top->entries().end()) {
      return Status::Corruption(where + " names '" + key +
                                "' as a key the export added, but the pickle's top-level dict "
                                "has no such entry");
    }
    top->entries().erase(it);
  }
  if (layout_->tree_was_null) {
    if (!tree.is_map() || !tree.entries().empty()) {
      return Status::Corruption(where + " says the tree was empty, but the pickle holds more "
                                "than the added keys");
    }
    tree = Value();
  }
  // The checkpoint's own order: sections as recorded, then tensors and RNG
  // records in the record's order.
  Checkpoint out;
  for (const SectionInfo& sec : ck_.sections()) {
    RCKPT_RETURN_IF_ERROR(out.AddSection(sec.name, sec.role));
  }
  // The record's tensors in checkpoint order: NumPy arrays at their places,
  // the others in the order listed.
  std::vector<std::string> listed(layout_->tensors.size() + layout_->arrays.size());
  for (const auto& a : layout_->arrays) {
    if (a.index >= listed.size() || !listed[a.index].empty()) {
      return Status::Corruption(where + " places the array '" + a.name + "' at " +
                                std::to_string(a.index) + ", outside 0.." +
                                std::to_string(listed.size() - 1) + " or taken twice");
    }
    listed[a.index] = a.name;
  }
  size_t next = 0;
  for (const auto& t : layout_->tensors) {
    while (!listed[next].empty()) ++next;
    listed[next] = t.name;
  }
  for (const std::string& name : listed) {
    const TensorEntry* e = ck_.FindTensor(name);
    if (e == nullptr) return Status::Corruption(where + " names '" + name + "' twice");
    if (out.FindTensor(name)) continue;
    RCKPT_RETURN_IF_ERROR(out.AddTensor(e->section, e->name, e->tensor, e->role));
    out.mutable_tensors().back().origin = e->origin;
  }
  for (const TensorEntry& e : ck_.tensors()) {  // any the record does not list
    if (out.FindTensor(e.name)) continue;
    RCKPT_RETURN_IF_ERROR(out.AddTensor(e.section, e.name, e.tensor, e.role));
    out.mutable_tensors().back().origin = e.origin;
  }
  for (const auto& r : layout_->rng) {
    const RngRecord* x = ck_.FindRng(r.name);
    if (x == nullptr) return Status::Corruption(where + " names '" + r.name + "' twice");
    RCKPT_RETURN_IF_ERROR(out.AddRng(x->name, x->kind, x->bytes, x->origin));
  }
  for (const RngRecord& x : ck_.rng()) {
    if (out.FindRng(x.name)) continue;
    RCKPT_RETURN_IF_ERROR(out.AddRng(x.name, x.kind, x.bytes, x.origin));
  }
  out.Tree() = std::move(tree);
  out.Metadata() = layout_->metadata;
  return out;
}

}  // namespace

Result<Checkpoint> ImportPyTorchFile(const RandomAccessFile& file, const ImportOptions& options,
                                     ImportReport* report) {
  Importer imp(file, options);
  return imp.Run(report);
}

}  // namespace convert

Result<Checkpoint> ImportPyTorchFromBytes(std::span<const std::byte> bytes,
                                          const ImportOptions& options, ImportReport* report) {
  convert::SpanFile f(bytes);
  convert::Importer imp(f, options);
  return imp.Run(report);
}

Result<Checkpoint> ImportPyTorch(const std::string& path, const ImportOptions& options,
                                 ImportReport* report) {
  FileSystem& fs = options.fs ? *options.fs : DefaultFileSystem();
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.OpenForRead(path));
  convert::Importer imp(*f, options);
  auto r = imp.Run(report);
  if (!r.ok()) return r.status().WithContext("'" + path + "'");
  return r;
}

}  // namespace rckpt
