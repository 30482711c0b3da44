// DCP import: a torch.distributed.checkpoint directory -> Checkpoint.
#include "convert/dcp_import.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <utility>

#include <unistd.h>

#include "convert/bytes.h"
#include "convert/import_common.h"
#include "convert/pickle_reader.h"
#include "convert/pytorch_import.h"
#include "core/shard_geometry.h"
#include "rckpt/file.h"

namespace rckpt {
namespace convert {
namespace {

constexpr char kMeta[] = "torch.distributed.checkpoint.metadata.";
constexpr char kFs[] = "torch.distributed.checkpoint.filesystem.";

// A list index beyond this in a planner path is refused (the list would be
// filled up to it).
constexpr int64_t kMaxListIndex = int64_t{1} << 24;

std::string KindName(const PyNode* n) {
  switch (n->kind) {
    case PyKind::kNone: return "None";
    case PyKind::kBool: return "a bool";
    case PyKind::kInt:
    case PyKind::kBigInt: return "an int";
    case PyKind::kFloat: return "a float";
    case PyKind::kStr: return "a str";
    case PyKind::kBytes: return "bytes";
    case PyKind::kList: return "a list";
    case PyKind::kTuple: return "a tuple";
    case PyKind::kDict: return "a dict";
    case PyKind::kSet: return "a set";
    case PyKind::kGlobal: return "the global " + Printable(n->s);
    case PyKind::kObject:
    case PyKind::kKnown: return "a " + Printable(n->s);
    default: return "a tensor or storage";
  }
}

Status Bad(const std::string& where, const std::string& expected, const PyNode* found) {
  return Status::Corruption("dcp: .metadata: " + where + ": expected " + expected + ", found " +
                            (found == nullptr ? std::string("nothing") : KindName(found)));
}

bool IsObject(const PyNode* n, std::string_view class_path) {
  return n != nullptr && n->kind == PyKind::kObject && n->s == class_path;
}

// A field of a dataclass object restored by BUILD with a dict state (or
// NEWOBJ_EX keyword arguments); nullptr when absent.
const PyNode* Field(const PyNode* obj, std::string_view name) {
  if (obj->state == nullptr || obj->state->kind != PyKind::kDict) return nullptr;
  for (const auto& [k, v] : obj->state->entries) {
    if (k->kind == PyKind::kStr && k->s == name) return v;
  }
  return nullptr;
}

Result<int64_t> IntField(const PyNode* n, const std::string& where, bool non_negative) {
  if (n == nullptr || n->kind != PyKind::kInt || (non_negative && n->i < 0)) {
    return Bad(where, non_negative ? "a non-negative int" : "an int", n);
  }
  return n->i;
}

// torch.Size(...) or a tuple/list of non-negative ints.
Result<Shape> SizeOf(const PyNode* n, const std::string& where) {
  const PyNode* t = n;
  if (t != nullptr && t->kind == PyKind::kKnown && t->s == "torch.Size") t = t->args;
  if (t == nullptr || (t->kind != PyKind::kTuple && t->kind != PyKind::kList)) {
    return Bad(where, "a torch.Size", n);
  }
  if (t->items.size() > 64) {
    return Status::Corruption("dcp: .metadata: " + where + ": " +
                              std::to_string(t->items.size()) + " dimensions (at most 64)");
  }
  Shape out;
  for (const PyNode* d : t->items) {
    RCKPT_ASSIGN_OR_RETURN(int64_t v, IntField(d, where + " dimension", true));
    out.push_back(v);
  }
  return out;
}

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Result<DcpStorage> StorageOf(const PyNode* n, const std::string& where) {
  if (!IsObject(n, std::string(kFs) + "_StorageInfo")) {
    return Bad(where, "a _StorageInfo", n);
  }
  DcpStorage s;
  const PyNode* path = Field(n, "relative_path");
  if (path == nullptr || path->kind != PyKind::kStr) {
    return Bad(where + ".relative_path", "a str", path);
  }
  s.relative_path = path->s;
  RCKPT_ASSIGN_OR_RETURN(int64_t off, IntField(Field(n, "offset"), where + ".offset", true));
  RCKPT_ASSIGN_OR_RETURN(int64_t len, IntField(Field(n, "length"), where + ".length", true));
  s.offset = static_cast<uint64_t>(off);
  s.length = static_cast<uint64_t>(len);
  const PyNode* tr = Field(n, "transform_descriptors");
  if (tr != nullptr && tr->kind != PyKind::kNone) {
    if (tr->kind != PyKind::kList && tr->kind != PyKind::kTuple) {
      return Bad(where + ".transform_descriptors", "a list of str", tr);
    }
    for (const PyNode* d : tr->items) {
      if (d->kind != PyKind::kStr) return Bad(where + ".transform_descriptors", "a str", d);
      s.transforms.push_back(d->s);
    }
  }
  // DCP names its files "__<rank>_<n>.distcp" in the checkpoint directory; a
  // path that leaves it is refused.
  const std::string& p = s.relative_path;
  if (p.empty() || p == "." || p == ".." || p.find('/') != std::string::npos ||
      p.find('\\') != std::string::npos || p.find('\0') != std::string::npos) {
    return Status::Corruption("dcp: .metadata: " + where + ".relative_path '" + Printable(p) +
                              "' is not a file name in the checkpoint directory");
  }
  return s;
}

// The dtype of a TensorProperties: its state is the tuple (dtype, layout,
// requires_grad, memory format, pin_memory[, strides]) DCP's __getstate__
// writes, or a field dict from older versions.
Result<DType> DTypeOf(const PyNode* props, const std::string& fqn) {
  std::string where = "tensor '" + Printable(fqn) + "' properties";
  if (!IsObject(props, std::string(kMeta) + "TensorProperties")) {
    return Bad(where, "a TensorProperties", props);
  }
  const PyNode* dtype = nullptr;
  const PyNode* layout = nullptr;
  if (props->state != nullptr && props->state->kind == PyKind::kTuple) {
    if (props->state->items.size() < 5) {
      return Status::Corruption("dcp: .metadata: " + where + ": a state tuple of " +
                                std::to_string(props->state->items.size()) +
                                " fields (expected 5 or 6)");
    }
    dtype = props->state->items[0];
    layout = props->state->items[1];
  } else {
    dtype = Field(props, "dtype");
    layout = Field(props, "layout");
  }
  if (dtype == nullptr || dtype->kind != PyKind::kGlobal || dtype->s.rfind("torch.", 0) != 0) {
    return Bad(where + ".dtype", "a torch dtype", dtype);
  }
  std::optional<DType> d = TorchDTypeFromName(dtype->s.substr(6));
  if (!d) {
    return Status::Unsupported("dcp: tensor '" + Printable(fqn) + "' has dtype " +
                               Printable(dtype->s) + ", which rckpt cannot hold");
  }
  if (layout != nullptr && layout->kind == PyKind::kKnown && layout->args != nullptr &&
      !layout->args->items.empty() && layout->args->items[0]->kind == PyKind::kStr &&
      layout->args->items[0]->s != "torch.strided") {
    return Status::Unsupported("dcp: tensor '" + Printable(fqn) + "' has layout " +
                               Printable(layout->args->items[0]->s) +
                               "; rckpt holds strided (dense) tensors only");
  }
  return *d;
}

Result<std::vector<DcpPathComponent>> PathOf(const PyNode* n, const std::string& fqn) {
  std::string where = "planner_data['" + Printable(fqn) + "']";
  if (n->kind != PyKind::kTuple && n->kind != PyKind::kList) {
    return Bad(where, "a tuple of keys", n);
  }
  if (n->items.empty()) return Bad(where, "a non-empty tuple of keys", n);
  std::vector<DcpPathComponent> out;
  for (const PyNode* c : n->items) {
    if (c->kind == PyKind::kStr) {
      out.emplace_back(c->s);
    } else if (c->kind == PyKind::kInt && c->i >= 0 && c->i < kMaxListIndex && !out.empty()) {
      out.emplace_back(c->i);
    } else if (c->kind == PyKind::kInt && out.empty()) {
      return Bad(where + " first key", "a str (the state dict's key)", c);
    } else {
      return Bad(where + " key", "a str or a list index 0.." + std::to_string(kMaxListIndex - 1),
                 c);
    }
  }
  return out;
}

std::string ComponentText(const DcpPathComponent& c) {
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  return std::to_string(std::get<int64_t>(c));
}

std::string JoinComponents(const std::vector<DcpPathComponent>& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out += '.';
    out += ComponentText(path[i]);
  }
  return out;
}

// A RandomAccessFile over [offset, offset + length) of another.
class RangeFile : public RandomAccessFile {
 public:
  RangeFile(const RandomAccessFile& base, uint64_t offset, uint64_t length)
      : base_(base), offset_(offset), length_(length) {}
  uint64_t Size() const override { return length_; }
  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    if (offset > length_ || dst.size() > length_ - offset) {
      return Status::Corruption("truncated: read of " + std::to_string(dst.size()) +
                                " bytes at " + std::to_string(offset) + " of an item of " +
                                std::to_string(length_) + " bytes");
    }
    return base_.ReadAt(offset_ + offset, dst);
  }

 private:
  const RandomAccessFile& base_;
  uint64_t offset_;
  uint64_t length_;
};

// The nested state dict being rebuilt from key paths.
struct Node {
  enum Kind { kUnset, kMap, kList, kLeaf } kind = kUnset;
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> entries;  // kMap, in order
  std::map<int64_t, std::unique_ptr<Node>> items;                        // kList
  Value leaf;
  std::string fqn;  // kLeaf: the item it holds
};

class DcpImporter {
 public:
  DcpImporter(std::string dir, const ImportOptions& options)
      : dir_(std::move(dir)),
        options_(options),
        fs_(options.fs ? *options.fs : DefaultFileSystem()) {}
  // Removes a scratch file a failed import left.
  ~DcpImporter() {
    if (!scratch_path_.empty()) (void)fs_.Remove(scratch_path_);
  }

  Result<Checkpoint> Run(ImportReport* report);

 private:
  Result<const RandomAccessFile*> File(const std::string& relative, const std::string& fqn);
  Result<Checkpoint> ReadArchive(const DcpStorage& s, const std::string& what);
  Result<Tensor> ReadChunk(const DcpItem& item, const DcpChunk& chunk);
  Result<Tensor> ReadTensor(const DcpItem& item);
  Result<Value> ReadValue(const DcpItem& item, const std::string& section);
  Status Place(const DcpItem& item, Value value);
  Value ToValue(Node& n);
  std::string NewName(const std::string& name);
  Status Stage(const std::string& section, const std::string& name, Tensor t);
  Status AddStaged();

  // A tensor written to the scratch file, added once the file is mapped.
  struct Staged {
    std::string section;
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t offset;
  };

  std::string dir_;
  const ImportOptions& options_;
  FileSystem& fs_;
  std::map<std::string, std::unique_ptr<RandomAccessFile>> files_;
  Checkpoint ck_;
  Node root_;
  std::set<std::string> inert_;
  std::vector<std::string> warnings_;
  std::set<std::string> names_;
  // Scratch staging (options.scratch_dir): the file, its path (removed by the
  // destructor unless already gone) and what it holds.
  std::unique_ptr<WritableFile> scratch_;
  std::string scratch_path_;
  uint64_t scratch_size_ = 0;
  std::vector<Staged> staged_;
};

std::string ItemWhere(const std::string& fqn, const DcpStorage& s) {
  return "item '" + Printable(fqn) + "' (bytes [" + std::to_string(s.offset) + ", " +
         std::to_string(s.offset + s.length) + ") of '" + Printable(s.relative_path) + "')";
}

Result<const RandomAccessFile*> DcpImporter::File(const std::string& relative,
                                                  const std::string& fqn) {
  auto it = files_.find(relative);
  if (it != files_.end()) return it->second.get();
  std::string path = dir_ + "/" + relative;
  Result<std::unique_ptr<RandomAccessFile>> f = fs_.OpenForRead(path);
  if (!f.ok()) {
    if (f.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("dcp: '" + path + "', which holds item '" + Printable(fqn) +
                              "', is missing");
    }
    return f.status();
  }
  return files_.emplace(relative, std::move(*f)).first->second.get();
}

Result<Checkpoint> DcpImporter::ReadArchive(const DcpStorage& s, const std::string& fqn) {
  const std::string where = ItemWhere(fqn, s);
  if (!s.transforms.empty()) {
    std::string list;
    for (const std::string& t : s.transforms) list += (list.empty() ? "" : ", ") + t;
    return Status::Unsupported("dcp: " + where + " was written through DCP stream extensions (" +
                               Printable(list) + "), which rckpt convert does not undo; save "
                               "it again without them");
  }
  RCKPT_ASSIGN_OR_RETURN(const RandomAccessFile* f, File(s.relative_path, fqn));
  uint64_t end;
  if (!AddOk(s.offset, s.length, &end) || end > f->Size()) {
    return Status::Corruption("dcp: " + where + " passes the end of the file (" +
                              std::to_string(f->Size()) + " bytes)");
  }
  RangeFile range(*f, s.offset, s.length);
  char head[4] = {};
  if (s.length >= 4) {
    RCKPT_RETURN_IF_ERROR(range.ReadAt(0, {reinterpret_cast<std::byte*>(head), 4}));
  }
  if (std::string_view(head, 4) != std::string_view("PK\x03\x04", 4)) {
    return Status::Unsupported("dcp: " + where +
                               " is not a torch.save archive (DCP's safetensors serialization "
                               "or a damaged file); rckpt convert reads DCP's default torch_save "
                               "format");
  }
  ImportOptions inner = options_;
  inner.rng_keys.clear();
  inner.section_overrides.clear();
  ImportReport rep;
  Result<Checkpoint> ck = ImportPyTorchFile(range, inner, &rep);
  if (!ck.ok()) return ck.status().WithContext("dcp: " + where);
  for (const std::string& w : rep.warnings) warnings_.push_back(where + ": " + w);
  inert_.insert(rep.inert_classes.begin(), rep.inert_classes.end());
  return ck;
}

Result<Tensor> DcpImporter::ReadChunk(const DcpItem& item, const DcpChunk& chunk) {
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, ReadArchive(chunk.storage, item.fqn));
  const std::string where = "dcp: tensor '" + Printable(item.fqn) + "' chunk at offsets " +
                            ShapeText(chunk.offsets);
  if (ck.Tree().kind() != ValueKind::kTensorRef || ck.tensors().size() != 1) {
    return Status::Corruption(where + ": the item's archive holds no single tensor");
  }
  const Tensor& t = ck.tensors()[0].tensor;
  if (t.dtype() != item.dtype) {
    return Status::Corruption(where + ": dtype " + std::string(DTypeName(t.dtype())) +
                              " differs from .metadata's " +
                              std::string(DTypeName(item.dtype)));
  }
  if (t.shape() != chunk.sizes) {
    return Status::Corruption(where + ": shape " + ShapeText(t.shape()) +
                              " differs from .metadata's chunk sizes " +
                              ShapeText(chunk.sizes));
  }
  return t;
}

Result<Tensor> DcpImporter::ReadTensor(const DcpItem& item) {
  const std::string where = "dcp: tensor '" + Printable(item.fqn) + "'";
  uint64_t numel = 1;
  for (int64_t d : item.shape) numel *= static_cast<uint64_t>(d);
  if (item.chunks.size() == 1 && item.chunks[0].sizes == item.shape &&
      std::all_of(item.chunks[0].offsets.begin(), item.chunks[0].offsets.end(),
                  [](int64_t o) { return o == 0; }) &&
      item.chunks[0].offsets.size() == item.shape.size()) {
    return ReadChunk(item, item.chunks[0]);
  }
  if (numel == 0) {
    for (const DcpChunk& c : item.chunks) RCKPT_RETURN_IF_ERROR(ReadChunk(item, c).status());
    return Tensor::Zeros(item.dtype, item.shape);
  }
  std::vector<Block> blocks;
  blocks.reserve(item.chunks.size());
  for (size_t i = 0; i < item.chunks.size(); ++i) {
    blocks.push_back({item.chunks[i].offsets, item.chunks[i].sizes});
    RCKPT_RETURN_IF_ERROR(CheckShardBlock(where + " chunk " + std::to_string(i), item.shape,
                                          blocks.back()));
  }
  std::vector<const Block*> ptrs;
  for (const Block& b : blocks) ptrs.push_back(&b);
  RCKPT_RETURN_IF_ERROR(CheckShardTiling(where, item.shape, ptrs));
  RCKPT_ASSIGN_OR_RETURN(Tensor whole, Tensor::Zeros(item.dtype, item.shape));
  const Block all = WholeBlock(item.shape);
  const size_t elem = DTypeSize(item.dtype);
  for (size_t i = 0; i < item.chunks.size(); ++i) {
    RCKPT_ASSIGN_OR_RETURN(Tensor part, ReadChunk(item, item.chunks[i]));
    CopyRegion(blocks[i], blocks[i], static_cast<const std::byte*>(part.data()), 0, all,
               static_cast<std::byte*>(whole.data()), elem);
  }
  return whole;
}

// Points the tensor references of `v` at the names `renamed` gives them.
void RenameRefs(Value& v, const std::map<std::string, std::string>& renamed) {
  switch (v.kind()) {
    case ValueKind::kTensorRef: v = Value::TensorRef(renamed.at(v.as_string())); return;
    case ValueKind::kObject: RenameRefs(v.fields(), renamed); return;
    case ValueKind::kMap:
      for (auto& [k, e] : v.entries()) RenameRefs(e, renamed);
      return;
    default:
      if (v.is_sequence()) {
        for (Value& e : v.items()) RenameRefs(e, renamed);
      }
  }
}

// A value DCP stored whole (torch.save of a tuple, a set, ...). Tensors
// inside it (a tuple of tensors: DCP flattens only dicts and lists) join the
// checkpoint named by the item's path and their place in the value.
Result<Value> DcpImporter::ReadValue(const DcpItem& item, const std::string& section) {
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, ReadArchive(item.bytes, item.fqn));
  if (!ck.rng().empty()) {
    return Status::Unsupported("dcp: item '" + Printable(item.fqn) + "' holds " +
                               std::to_string(ck.rng().size()) +
                               " Python RNG state(s) inside a value; rckpt convert keeps "
                               "tensors and plain values only");
  }
  std::map<std::string, std::string> renamed;
  const std::string prefix = JoinComponents(item.path);
  for (TensorEntry& e : ck.mutable_tensors()) {
    std::string name = NewName(prefix + "." + e.name);
    RCKPT_RETURN_IF_ERROR(Stage(section, name, std::move(e.tensor)));
    renamed[e.name] = std::move(name);
  }
  Value v = std::move(ck.Tree());
  if (!renamed.empty()) RenameRefs(v, renamed);
  return v;
}

Status DcpImporter::Place(const DcpItem& item, Value value) {
  Node* n = &root_;
  n->kind = Node::kMap;
  for (size_t i = 0; i < item.path.size(); ++i) {
    const DcpPathComponent& c = item.path[i];
    Node::Kind want = std::holds_alternative<std::string>(c) ? Node::kMap : Node::kList;
    if (n->kind != Node::kUnset && n->kind != want) {
      std::vector<DcpPathComponent> prefix(item.path.begin(), item.path.begin() + i);
      return Status::Corruption(
          "dcp: .metadata: the key path of '" + Printable(item.fqn) + "' uses '" +
          Printable(JoinComponents(prefix)) + "' as a " +
          (want == Node::kMap ? "dict" : "list") + " where another item's path " +
          (n->kind == Node::kLeaf ? "stores the value '" + Printable(n->fqn) + "'"
                                  : std::string("uses it as a ") +
                                        (n->kind == Node::kMap ? "dict" : "list")));
    }
    n->kind = want;
    std::unique_ptr<Node>* slot;
    if (want == Node::kMap) {
      const std::string& key = std::get<std::string>(c);
      auto it = std::find_if(n->entries.begin(), n->entries.end(),
                             [&](const auto& e) { return e.first == key; });
      if (it == n->entries.end()) {
        n->entries.emplace_back(key, std::make_unique<Node>());
        it = n->entries.end() - 1;
      }
      slot = &it->second;
    } else {
      slot = &n->items[std::get<int64_t>(c)];
      if (!*slot) *slot = std::make_unique<Node>();
    }
    n = slot->get();
  }
  if (n->kind != Node::kUnset) {
    return Status::Corruption("dcp: .metadata: items '" + Printable(item.fqn) + "' and '" +
                              Printable(n->kind == Node::kLeaf ? n->fqn : "(a container)") +
                              "' have the same key path");
  }
  n->kind = Node::kLeaf;
  n->leaf = std::move(value);
  n->fqn = item.fqn;
  return Status::Ok();
}

Value DcpImporter::ToValue(Node& n) {
  switch (n.kind) {
    case Node::kLeaf: return std::move(n.leaf);
    case Node::kMap: {
      std::vector<Value::Entry> entries;
      entries.reserve(n.entries.size());
      for (auto& [k, child] : n.entries) entries.emplace_back(Value(k), ToValue(*child));
      return Value::Map(std::move(entries));
    }
    case Node::kList: {
      std::vector<Value> items;
      int64_t next = 0;
      for (auto& [i, child] : n.items) {
        if (i > next) {
          warnings_.push_back("a list in the state dict has no item" +
                              std::string(i - next > 1 ? "s " : " ") + std::to_string(next) +
                              (i - next > 1 ? ".." + std::to_string(i - 1) : "") +
                              " (DCP stores no empty container); filled with None");
        }
        for (; next < i; ++next) items.emplace_back();
        items.push_back(ToValue(*child));
        next = i + 1;
      }
      return Value::List(std::move(items));
    }
    default: return Value();
  }
}

std::string DcpImporter::NewName(const std::string& name) {
  std::string out = name;
  for (int i = 2; names_.count(out); ++i) out = name + "~" + std::to_string(i);
  if (out != name) {
    warnings_.push_back("two items are named '" + name + "'; the second tensor is '" + out +
                        "'");
  }
  names_.insert(out);
  return out;
}

// Without a scratch file the tensor joins the checkpoint now; with one, its
// bytes go to the file (at a 64-byte aligned offset) and its memory is freed.
Status DcpImporter::Stage(const std::string& section, const std::string& name, Tensor t) {
  if (scratch_ == nullptr) return ck_.AddTensor(section, name, std::move(t));
  static constexpr std::byte kZeros[64] = {};
  const uint64_t pad = (64 - scratch_size_ % 64) % 64;
  if (t.nbytes() > 0) {
    RCKPT_RETURN_IF_ERROR(scratch_->Append({kZeros, pad}));
    RCKPT_RETURN_IF_ERROR(scratch_->Append(t.host_bytes()));
  }
  staged_.push_back({section, name, t.dtype(), t.shape(), scratch_size_ + pad});
  if (t.nbytes() > 0) scratch_size_ += pad + t.nbytes();
  return Status::Ok();
}

// Maps the scratch file back and adds its tensors in item order, then
// removes the file (the mapping keeps its pages). Where the file system
// cannot map, the tensors are read back into memory.
Status DcpImporter::AddStaged() {
  if (scratch_ == nullptr) return Status::Ok();
  RCKPT_RETURN_IF_ERROR(scratch_->Close());
  scratch_.reset();
  std::unique_ptr<RandomAccessFile> f;
  Result<std::shared_ptr<std::byte>> map = Status::Unsupported("empty");
  if (scratch_size_ > 0) {
    RCKPT_ASSIGN_OR_RETURN(f, fs_.OpenForRead(scratch_path_));
    map = f->MapPrivate();
  }
  for (const Staged& st : staged_) {
    Tensor t;
    uint64_t nbytes = DTypeSize(st.dtype);
    for (int64_t d : st.shape) nbytes *= static_cast<uint64_t>(d);
    if (nbytes == 0) {
      RCKPT_ASSIGN_OR_RETURN(t, Tensor::Zeros(st.dtype, st.shape));
    } else if (map.ok()) {
      t = Tensor::Adopt(st.dtype, st.shape, Device::Cpu(), std::shared_ptr<void>(*map),
                        map->get() + st.offset);
    } else {
      RCKPT_ASSIGN_OR_RETURN(t, Tensor::Empty(st.dtype, st.shape));
      RCKPT_RETURN_IF_ERROR(f->ReadAt(st.offset, t.mutable_host_bytes()));
    }
    RCKPT_RETURN_IF_ERROR(ck_.AddTensor(st.section, st.name, std::move(t)));
  }
  f.reset();
  if (fs_.Remove(scratch_path_).ok()) scratch_path_.clear();
  return Status::Ok();
}

Result<Checkpoint> DcpImporter::Run(ImportReport* report) {
  const std::string meta_path = DcpMetadataPath(dir_);
  Result<std::unique_ptr<RandomAccessFile>> mf = fs_.OpenForRead(meta_path);
  if (!mf.ok()) {
    if (mf.status().code() == StatusCode::kNotFound) {
      return Status::NotFound("dcp: '" + dir_ +
                              "' has no .metadata: not a torch.distributed.checkpoint "
                              "directory (or its save did not finish; DCP writes .metadata "
                              "last)");
    }
    return mf.status();
  }
  const uint64_t size = (*mf)->Size();
  if (size > options_.limits.max_pickle_bytes) {
    return Status::Corruption("dcp: .metadata of " + std::to_string(size) +
                              " bytes exceeds the limit of " +
                              std::to_string(options_.limits.max_pickle_bytes));
  }
  std::vector<std::byte> bytes(size);
  RCKPT_RETURN_IF_ERROR((*mf)->ReadAt(0, bytes));
  RCKPT_ASSIGN_OR_RETURN(DcpMetadata md, ParseDcpMetadata(bytes, options_.limits));
  warnings_ = std::move(md.warnings);

  if (!options_.scratch_dir.empty()) {
    // Unique per process and per import: imports may run concurrently.
    static std::atomic<uint64_t> counter{0};
    scratch_path_ = options_.scratch_dir + "/.rckpt-dcp-scratch-" + std::to_string(::getpid()) +
                    "-" + std::to_string(counter++);
    Result<std::unique_ptr<WritableFile>> f = fs_.OpenForWrite(scratch_path_);
    if (!f.ok()) {
      scratch_path_.clear();
      return f.status().WithContext("dcp: creating the scratch file in '" +
                                    options_.scratch_dir + "'");
    }
    scratch_ = std::move(*f);
  }
  std::set<std::string> sections;
  for (const DcpItem& item : md.items) {
    const std::string& section = std::get<std::string>(item.path[0]);
    if (sections.insert(section).second) {
      RCKPT_RETURN_IF_ERROR(ck_.AddSection(section, DefaultRoleForSection(section)));
    }
    Value value;
    if (item.is_tensor) {
      RCKPT_ASSIGN_OR_RETURN(Tensor t, ReadTensor(item));
      std::string name = NewName(JoinComponents(item.path));
      RCKPT_RETURN_IF_ERROR(Stage(section, name, std::move(t)));
      value = Value::TensorRef(name);
    } else {
      RCKPT_ASSIGN_OR_RETURN(value, ReadValue(item, section));
    }
    RCKPT_RETURN_IF_ERROR(Place(item, std::move(value)));
  }
  RCKPT_RETURN_IF_ERROR(AddStaged());
  root_.kind = Node::kMap;
  ck_.Tree() = ToValue(root_);
  // The tree holds every item at its key path: the fqns and paths DCP
  // gave them are the tree's (rckpt.dcp.Reader walks it), not copied here.
  if (!md.version.empty()) ck_.Metadata()["rckpt.dcp.version"] = md.version;
  if (report != nullptr) {
    report->format = "dcp";
    report->inert_classes.assign(inert_.begin(), inert_.end());
    report->warnings.insert(report->warnings.end(), warnings_.begin(), warnings_.end());
    // DCP records the state dict's items by key path: the tree, but not the
    // order of its keys (its planner orders them), sections and roles,
    // devices, RNG kinds or metadata.
    report->recorded.sections = false;
    report->recorded.origins = false;
    report->recorded.rng_kinds = false;
    report->recorded.key_order = false;
    report->recorded.metadata = false;
  }
  return std::move(ck_);
}

}  // namespace

std::string DcpMetadataPath(const std::string& dir) {
  if (!dir.empty() && dir.back() == '/') return dir + ".metadata";
  return dir + "/.metadata";
}

const std::set<std::string>& DcpAllowedGlobals() {
  static const std::set<std::string> kAllowed = [] {
    std::set<std::string> s = {
        "torch.Size",
        "torch.serialization._get_layout",
        "torch.strided",
        "torch.contiguous_format",
        "torch.channels_last",
        "torch.channels_last_3d",
        "torch.preserve_format",
        "collections.OrderedDict",
        "builtins.getattr",
        "pathlib.Path",
        "pathlib.PosixPath",
        "pathlib.WindowsPath",
        "pathlib.PurePosixPath",
        "pathlib.PureWindowsPath",
    };
    for (const char* c : {"Metadata", "MetadataIndex", "TensorStorageMetadata",
                          "BytesStorageMetadata", "ChunkStorageMetadata", "TensorProperties",
                          "StorageMeta", "_MEM_FORMAT_ENCODING"}) {
      s.insert(std::string(kMeta) + c);
    }
    s.insert(std::string(kFs) + "_StorageInfo");
    s.insert(std::string(kFs) + "_StoragePrefix");
    for (int i = 0; i < kNumDTypes; ++i) {
      std::string_view name = TorchDTypeName(static_cast<DType>(i));
      if (!name.empty()) s.insert("torch." + std::string(name));
    }
    // Aliases torch pickles some dtypes under.
    for (const char* alias : {"torch.float", "torch.double", "torch.half", "torch.long",
                              "torch.int", "torch.short", "torch.bool", "torch.cfloat",
                              "torch.cdouble",
                              // dtypes rckpt cannot hold: named in their own error
                              "torch.complex32", "torch.chalf", "torch.qint8", "torch.quint8",
                              "torch.qint32", "torch.quint4x2", "torch.quint2x4",
                              "torch.float8_e4m3fnuz", "torch.float8_e5m2fnuz",
                              "torch.float8_e8m0fnu", "torch.float4_e2m1fn_x2"}) {
      s.insert(alias);
    }
    return s;
  }();
  return kAllowed;
}

Result<DcpMetadata> ParseDcpMetadata(std::span<const std::byte> bytes,
                                     const PickleLimits& limits) {
  Result<PickleResult> pr = UnpickleAllowed(bytes, limits, DcpAllowedGlobals());
  if (!pr.ok()) return pr.status().WithContext("dcp: .metadata");
  const PyNode* root = pr->root;
  if (!IsObject(root, std::string(kMeta) + "Metadata")) {
    return Bad("the pickled object", "a torch.distributed.checkpoint Metadata", root);
  }
  DcpMetadata md;
  if (const PyNode* v = Field(root, "version"); v != nullptr && v->kind == PyKind::kStr) {
    md.version = v->s;
  }
  const PyNode* sdm = Field(root, "state_dict_metadata");
  if (sdm == nullptr || sdm->kind != PyKind::kDict) {
    return Bad("state_dict_metadata", "a dict", sdm);
  }
  const PyNode* planner = Field(root, "planner_data");
  if (planner != nullptr && planner->kind != PyKind::kDict && planner->kind != PyKind::kNone) {
    return Bad("planner_data", "a dict or None", planner);
  }
  const PyNode* storage = Field(root, "storage_data");
  if (storage == nullptr || storage->kind != PyKind::kDict) {
    return Bad("storage_data", "a dict", storage);
  }
  // fqn -> its storage entries (offset: nullopt for bytes).
  std::map<std::string, std::vector<std::pair<std::optional<Shape>, DcpStorage>>> stored;
  for (const auto& [k, v] : storage->entries) {
    if (!IsObject(k, std::string(kMeta) + "MetadataIndex")) {
      return Bad("a storage_data key", "a MetadataIndex", k);
    }
    const PyNode* fqn = Field(k, "fqn");
    if (fqn == nullptr || fqn->kind != PyKind::kStr) {
      return Bad("a storage_data key's fqn", "a str", fqn);
    }
    std::string where = "storage_data['" + Printable(fqn->s) + "']";
    std::optional<Shape> offset;
    if (const PyNode* o = Field(k, "offset"); o != nullptr && o->kind != PyKind::kNone) {
      RCKPT_ASSIGN_OR_RETURN(offset, SizeOf(o, where + " offset"));
    }
    RCKPT_ASSIGN_OR_RETURN(DcpStorage s, StorageOf(v, where));
    stored[fqn->s].emplace_back(std::move(offset), std::move(s));
  }
  std::map<std::string, const PyNode*> paths;
  if (planner != nullptr && planner->kind == PyKind::kDict) {
    for (const auto& [pk, pv] : planner->entries) {
      if (pk->kind != PyKind::kStr) return Bad("a planner_data key", "a str", pk);
      paths[pk->s] = pv;
    }
  }
  for (const auto& [k, v] : sdm->entries) {
    if (k->kind != PyKind::kStr) return Bad("a state_dict_metadata key", "a str", k);
    DcpItem item;
    item.fqn = k->s;
    const std::string q = "'" + Printable(item.fqn) + "'";
    if (auto p = paths.find(item.fqn); p != paths.end()) {
      RCKPT_ASSIGN_OR_RETURN(item.path, PathOf(p->second, item.fqn));
    } else {
      item.path = {item.fqn};
    }
    auto entries = stored.find(item.fqn);
    if (IsObject(v, std::string(kMeta) + "TensorStorageMetadata")) {
      item.is_tensor = true;
      RCKPT_ASSIGN_OR_RETURN(item.dtype, DTypeOf(Field(v, "properties"), item.fqn));
      RCKPT_ASSIGN_OR_RETURN(item.shape, SizeOf(Field(v, "size"), "tensor " + q + " size"));
      const PyNode* chunks = Field(v, "chunks");
      if (chunks == nullptr || chunks->kind != PyKind::kList) {
        return Bad("tensor " + q + " chunks", "a list", chunks);
      }
      for (size_t i = 0; i < chunks->items.size(); ++i) {
        const PyNode* c = chunks->items[i];
        std::string where = "tensor " + q + " chunk " + std::to_string(i);
        if (!IsObject(c, std::string(kMeta) + "ChunkStorageMetadata")) {
          return Bad(where, "a ChunkStorageMetadata", c);
        }
        DcpChunk chunk;
        RCKPT_ASSIGN_OR_RETURN(chunk.offsets, SizeOf(Field(c, "offsets"), where + " offsets"));
        RCKPT_ASSIGN_OR_RETURN(chunk.sizes, SizeOf(Field(c, "sizes"), where + " sizes"));
        if (chunk.offsets.size() != item.shape.size() || chunk.sizes.size() != item.shape.size()) {
          return Status::Corruption("dcp: .metadata: " + where + ": offsets " +
                                    ShapeText(chunk.offsets) + " and sizes " +
                                    ShapeText(chunk.sizes) + " do not have the rank of size " +
                                    ShapeText(item.shape));
        }
        bool found = false;
        if (entries != stored.end()) {
          for (const auto& [off, s] : entries->second) {
            if (off && *off == chunk.offsets) {
              chunk.storage = s;
              found = true;
              break;
            }
          }
        }
        if (!found) {
          return Status::Corruption("dcp: .metadata: " + where + " at offsets " +
                                    ShapeText(chunk.offsets) + " has no storage_data entry");
        }
        item.chunks.push_back(std::move(chunk));
      }
      if (item.chunks.empty()) {
        return Status::Corruption("dcp: .metadata: tensor " + q + " has no chunks");
      }
    } else if (IsObject(v, std::string(kMeta) + "BytesStorageMetadata")) {
      bool found = false;
      if (entries != stored.end()) {
        for (const auto& [off, s] : entries->second) {
          if (!off) {
            item.bytes = s;
            found = true;
            break;
          }
        }
      }
      if (!found) {
        return Status::Corruption("dcp: .metadata: value " + q + " has no storage_data entry");
      }
    } else {
      return Bad("state_dict_metadata[" + q + "]",
                 "a TensorStorageMetadata or BytesStorageMetadata", v);
    }
    md.items.push_back(std::move(item));
  }
  return md;
}

}  // namespace convert

Result<Checkpoint> ImportDcp(const std::string& dir, const ImportOptions& options,
                             ImportReport* report) {
  convert::DcpImporter imp(dir, options);
  return imp.Run(report);
}

}  // namespace rckpt
