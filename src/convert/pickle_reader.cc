#include "convert/pickle_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>

#include "convert/bytes.h"
#include "util/hex.h"

namespace rckpt::convert {
namespace {

using std::string_view;

struct DTypeName {
  const char* torch_name;
  const char* storage;  // legacy storage class, "" for UntypedStorage + dtype
  DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"float64", "DoubleStorage", DType::kF64},
    {"float32", "FloatStorage", DType::kF32},
    {"float16", "HalfStorage", DType::kF16},
    {"bfloat16", "BFloat16Storage", DType::kBF16},
    {"float8_e4m3fn", "", DType::kF8E4M3FN},
    {"float8_e5m2", "", DType::kF8E5M2},
    {"int8", "CharStorage", DType::kI8},
    {"int16", "ShortStorage", DType::kI16},
    {"int32", "IntStorage", DType::kI32},
    {"int64", "LongStorage", DType::kI64},
    {"uint8", "ByteStorage", DType::kU8},
    {"uint16", "", DType::kU16},
    {"uint32", "", DType::kU32},
    {"uint64", "", DType::kU64},
    {"bool", "BoolStorage", DType::kBool},
    {"complex64", "ComplexFloatStorage", DType::kC64},
    {"complex128", "ComplexDoubleStorage", DType::kC128},
};
// Aliases torch also pickles (dtype.__reduce__ returns the canonical name, so
// these appear only in hand-made pickles, but they are the same dtypes).
constexpr std::pair<const char*, const char*> kDTypeAliases[] = {
    {"double", "float64"}, {"float", "float32"}, {"half", "float16"},
    {"long", "int64"},     {"int", "int32"},     {"short", "int16"},
    {"cfloat", "complex64"}, {"cdouble", "complex128"},
};
// Torch dtypes that exist but that rckpt cannot hold.
constexpr const char* kUnsupportedDTypes[] = {
    "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    "complex32",       "chalf",           "qint8",          "quint8",
    "qint32",          "quint4x2",        "quint2x4",       "bits1x8",
    "bits2x4",         "bits4x2",         "bits8",          "bits16",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
    "int1", "int2", "int3", "int4", "int5", "int6", "int7",
};

bool StartsWith(string_view s, string_view p) { return s.substr(0, p.size()) == p; }

bool InModule(string_view module, string_view root) {
  return module == root || (StartsWith(module, root) && module.size() > root.size() &&
                            module[root.size()] == '.');
}

// Modules whose globals can only serve to run code; refused outright.
constexpr const char* kDeniedModules[] = {
    "os", "posix", "nt", "sys", "subprocess", "shutil", "socket", "importlib", "runpy",
    "pickle", "_pickle", "marshal", "ctypes", "code", "codeop", "pty", "webbrowser",
    "multiprocessing", "threading", "_thread", "signal", "functools", "types", "inspect", "io", "_io", "tempfile", "asyncio", "http", "urllib",
    "ftplib", "smtplib", "telnetlib", "timeit", "trace", "pdb", "bdb", "cProfile",
    "profile", "imp", "zipimport", "pkgutil", "site", "sysconfig", "platform", "shelve",
    "dbm", "sqlite3", "pip", "setuptools", "distutils", "torch.hub", "torch.jit",
    "torch.package", "torch.ops", "torch._C", "torch._dynamo", "torch._inductor",
    "torch.utils.cpp_extension", "numpy.testing", "numpy.f2py", "numpy.distutils",
    "numpy.lib.npyio", "numpy.ctypeslib",
};

// The only names of operator / _operator allowed: arithmetic and comparison
// functions, which pickled modules hold as values (hippynn's algebra nodes
// keep fn = operator.pow). Referencing is all they can do here: REDUCE of a
// lower-case function is refused; attrgetter, itemgetter, methodcaller and
// call are refused as globals.
constexpr const char* kOperatorFunctions[] = {
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos", "abs",
    "invert", "lshift", "rshift", "and_", "or_", "xor", "not_", "truth", "eq", "ne", "lt",
    "le", "gt", "ge",
};

// Modules where only the listed names are allowed (everything else there is
// a function that could run code: builtins.eval, torch.load, ...).
struct PartialModule {
  const char* module;
  std::initializer_list<const char*> names;
};
const PartialModule kPartialModules[] = {
    {"builtins", {"set", "frozenset", "complex", "bytearray", "bytes", "int", "float", "str",
                  "bool", "dict", "list", "tuple", "slice", "range", "object"}},
    {"copyreg", {"_reconstructor", "__newobj__", "__newobj_ex__"}},
    {"_codecs", {"encode"}},
    {"codecs", {"encode"}},
    {"torch.serialization", {"_get_layout"}},
    {"torch._utils", {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
                      "_rebuild_parameter", "_rebuild_parameter_with_state",
                      "_rebuild_qtensor", "_rebuild_sparse_tensor",
                      "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass",
                      "_rebuild_device_tensor_from_numpy",
                      "_rebuild_device_tensor_from_cpu_tensor", "_rebuild_nested_tensor",
                      "_rebuild_xla_tensor"}},
    {"torch._tensor", {"_rebuild_from_type_v2", "_rebuild_from_type", "Tensor"}},
    {"torch.storage", {"UntypedStorage", "TypedStorage", "_load_from_bytes"}},
    {"collections", {"OrderedDict", "Counter", "defaultdict", "deque", "ChainMap"}},
};

// Lower-case callables that only construct plain data; REDUCE of them is
// kept as an inert object rather than refused.
constexpr const char* kInertCallables[] = {
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.dtype",
    "numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer",
    "numpy.ndarray", "collections.defaultdict", "collections.deque", "datetime.datetime",
    "datetime.date", "datetime.time", "datetime.timedelta", "datetime.timezone",
    "copyreg._reconstructor", "builtins.slice", "builtins.range", "builtins.object",
    "builtins.int", "builtins.float", "builtins.str", "builtins.bool", "builtins.dict",
    "builtins.list", "builtins.tuple", "builtins.frozenset",
};

bool IsTorchTopLevelName(string_view name) {
  if (TorchDTypeFromName(name)) return true;
  for (const auto& a : kDTypeAliases) if (name == a.first) return true;
  for (const char* u : kUnsupportedDTypes) if (name == u) return true;
  static const std::set<string_view> kNames = {
      "Size", "device", "dtype", "Tensor", "layout", "strided", "sparse_coo", "sparse_csr",
      "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "per_tensor_affine",
      "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
      "per_channel_affine_float_qparams", "memory_format", "contiguous_format",
      "channels_last", "preserve_format", "finfo", "iinfo", "Generator"};
  if (kNames.count(name)) return true;
  auto ends = [&](string_view suf) {
    return name.size() > suf.size() && name.substr(name.size() - suf.size()) == suf;
  };
  return ends("Storage") || ends("Tensor");
}

// Refuses globals that could only mean code execution. `module` is normalised.
Status CheckGlobal(const std::string& module, const std::string& name, size_t offset) {
  std::string path = module + "." + name;
  std::string at = "' at offset " + std::to_string(offset);
  for (const char* m : kDeniedModules) {
    if (InModule(module, m)) {
      return Status::Unsupported("pickle: refusing global '" + Printable(path) + at +
                                 ": module '" + m +
                                 "' can only serve to run code; nothing was executed");
    }
  }
  if (module == "operator" || module == "_operator") {
    for (const char* n : kOperatorFunctions) if (name == n) return Status::Ok();
    return Status::Unsupported("pickle: refusing global '" + Printable(path) +
                               "': only arithmetic operator functions are allowed; nothing "
                               "was executed");
  }
  for (const PartialModule& pm : kPartialModules) {
    if (module == pm.module) {
      for (const char* n : pm.names) if (name == n) return Status::Ok();
      return Status::Unsupported("pickle: refusing global '" + Printable(path) + at +
                                 ": a function outside the allowlist; nothing was executed");
    }
  }
  if (module == "torch" && !IsTorchTopLevelName(name)) {
    return Status::Unsupported("pickle: refusing global '" + Printable(path) + at +
                               ": a torch function outside the allowlist; nothing was "
                               "executed");
  }
  if (module == "torch.cuda" && !(name.size() > 7 && (name.ends_with("Storage") ||
                                                      name.ends_with("Tensor")))) {
    return Status::Unsupported("pickle: refusing global '" + Printable(path) + at +
                               ": a torch.cuda function outside the allowlist; nothing was "
                               "executed");
  }
  return Status::Ok();
}

std::string NormaliseModule(string_view module) {
  if (module == "__builtin__") return "builtins";
  if (module == "copy_reg") return "copyreg";
  if (module == "torch.tensor") return "torch._tensor";
  if (module == "numpy.core._multiarray_umath") return "numpy.core.multiarray";
  if (module == "numpy._core._multiarray_umath") return "numpy._core.multiarray";
  return std::string(module);
}

bool ValidIdentifierPath(string_view s) {
  if (s.empty() || s.size() > 512) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '<' ||
          c == '>' || c == '-')) {
      return false;
    }
  }
  return true;
}

class Machine {
 public:
  Machine(std::span<const std::byte> data, const PickleLimits& limits, bool strict,
          const std::set<std::string>* allowed = nullptr)
      : data_(data), limits_(limits), strict_(strict), allowed_(allowed) {}

  Result<PickleResult> Run();

 private:
  // Input.
  Status Need(uint64_t n, const char* what) {
    if (n > data_.size() - pos_) {
      return Status::Corruption("pickle: truncated " + std::string(what) + " at offset " +
                                std::to_string(op_pos_) + " (need " + std::to_string(n) +
                                " bytes, " + std::to_string(data_.size() - pos_) + " left)");
    }
    return Status::Ok();
  }
  Result<uint64_t> ReadUint(int n, const char* what) {
    RCKPT_RETURN_IF_ERROR(Need(n, what));
    uint64_t v = LoadLE(data_.data() + pos_, n);
    pos_ += n;
    return v;
  }
  Result<std::string> ReadBytes(uint64_t n, const char* what) {
    RCKPT_RETURN_IF_ERROR(Need(n, what));
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  Result<std::string> ReadLine(const char* what) {
    const std::byte* begin = data_.data() + pos_;
    size_t left = data_.size() - pos_;
    const void* nl = std::memchr(begin, '\n', std::min<size_t>(left, 4096));
    if (nl == nullptr) {
      return Status::Corruption("pickle: unterminated " + std::string(what) + " at offset " +
                                std::to_string(op_pos_));
    }
    size_t len = static_cast<const std::byte*>(nl) - begin;
    std::string s(reinterpret_cast<const char*>(begin), len);
    pos_ += len + 1;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }

  // Errors.
  Status Corrupt(const std::string& what) {
    return Status::Corruption("pickle: " + what + " at offset " + std::to_string(op_pos_));
  }

  // Nodes.
  PyNode* New(PyKind kind) {
    result_.arena.push_back(std::make_unique<PyNode>());
    result_.arena.back()->kind = kind;
    return result_.arena.back().get();
  }
  PyNode* NewInt(int64_t v) {
    PyNode* n = New(PyKind::kInt);
    n->i = v;
    return n;
  }
  PyNode* NewStr(std::string s, PyKind kind = PyKind::kStr) {
    PyNode* n = New(kind);
    n->s = std::move(s);
    return n;
  }
  PyNode* NewBool(bool b) {
    PyNode* n = New(PyKind::kBool);
    n->b = b;
    return n;
  }

  // Stack.
  Status Push(PyNode* n) {
    if (stack_.size() + marks_.size() >= limits_.max_stack_depth) {
      return Corrupt("stack depth exceeds the limit of " +
                     std::to_string(limits_.max_stack_depth));
    }
    stack_.push_back(n);
    return Status::Ok();
  }
  Result<PyNode*> Pop() {
    if (stack_.size() <= MarkBase()) return Corrupt("stack underflow");
    PyNode* n = stack_.back();
    stack_.pop_back();
    return n;
  }
  Result<PyNode*> Top() {
    if (stack_.size() <= MarkBase()) return Corrupt("stack underflow");
    return stack_.back();
  }
  size_t MarkBase() const { return marks_.empty() ? 0 : marks_.back(); }
  Result<std::vector<PyNode*>> PopMark() {
    if (marks_.empty()) return Corrupt("no MARK on the stack");
    size_t base = marks_.back();
    marks_.pop_back();
    std::vector<PyNode*> items(stack_.begin() + base, stack_.end());
    stack_.resize(base);
    return items;
  }

  // Memo.
  Status Put(uint64_t index) {
    RCKPT_ASSIGN_OR_RETURN(PyNode * top, Top());
    if (memo_.size() >= limits_.max_memo_entries && !memo_.count(index)) {
      return Corrupt("memo exceeds the limit of " + std::to_string(limits_.max_memo_entries) +
                     " entries");
    }
    memo_[index] = top;
    return Status::Ok();
  }
  Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Corrupt("memo index " + std::to_string(index) + " not set");
    return Push(it->second);
  }

  // Containers.
  Result<std::string> KeyString(const PyNode* k, int depth = 0);
  Status SetItem(PyNode* dict, PyNode* key, PyNode* value);
  Status Append(PyNode* list, PyNode* value);

  // Globals and calls.
  Status PushGlobal(const std::string& module, const std::string& name);
  Status Call(PyNode* callable, PyNode* args, bool newobj);
  Result<PyNode*> Reduce(const std::string& path, PyNode* args);
  Result<PyNode*> RebuildTensor(const std::string& fn, const std::vector<PyNode*>& a);
  Status Build(PyNode* obj, PyNode* state);
  Result<PyNode*> PersistentLoad(PyNode* pid);
  Status Dispatch(uint8_t op);
  void NoteUnknown(const std::string& path) { unknown_.insert(path); }

  std::span<const std::byte> data_;
  PickleLimits limits_;
  bool strict_;
  // Non-null: the only globals a plain (non-torch.save) pickle may name.
  const std::set<std::string>* allowed_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  bool stopped_ = false;
  std::vector<PyNode*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyNode*> memo_;
  std::unordered_map<const PyNode*, std::unordered_map<std::string, size_t>> dict_index_;
  std::set<std::string> unknown_;
  PickleResult result_;
};

Result<std::string> Machine::KeyString(const PyNode* k, int depth) {
  if (depth > 32) return Corrupt("dict key nested too deeply");
  switch (k->kind) {
    case PyKind::kNone: return std::string("N");
    case PyKind::kBool: return std::string(k->b ? "i1" : "i0");  // True == 1 in Python
    case PyKind::kInt: return "i" + std::to_string(k->i);
    case PyKind::kBigInt: return "L" + k->s;
    case PyKind::kFloat: {
      if (k->f == std::floor(k->f) && std::fabs(k->f) < 9e18) {
        return "i" + std::to_string(static_cast<int64_t>(k->f));
      }
      uint64_t bits;
      std::memcpy(&bits, &k->f, 8);
      return "f" + std::to_string(bits);
    }
    case PyKind::kStr: return "s" + k->s;
    case PyKind::kBytes: return "b" + k->s;
    case PyKind::kTuple: {
      std::string s = "t(";
      for (const PyNode* it : k->items) {
        RCKPT_ASSIGN_OR_RETURN(std::string e, KeyString(it, depth + 1));
        s += std::to_string(e.size()) + ":" + e;
      }
      return s + ")";
    }
    case PyKind::kList:
    case PyKind::kDict:
    case PyKind::kSet:
      return Corrupt("unhashable " + std::string(k->kind == PyKind::kList   ? "list"
                                                 : k->kind == PyKind::kDict ? "dict"
                                                                            : "set") +
                     " used as a dict key");
    default: {
      // Objects, globals, tensors: hashed by identity in Python.
      char buf[32];
      std::snprintf(buf, sizeof(buf), "@%p", static_cast<const void*>(k));
      return std::string(buf);
    }
  }
}

Status Machine::SetItem(PyNode* target, PyNode* key, PyNode* value) {
  if (target->kind != PyKind::kDict && target->kind != PyKind::kObject) {
    return Corrupt("SETITEM on a non-dict (" + std::to_string(static_cast<int>(target->kind)) +
                   ")");
  }
  RCKPT_ASSIGN_OR_RETURN(std::string ks, KeyString(key));
  auto& index = dict_index_[target];
  auto it = index.find(ks);
  if (it != index.end()) {
    target->entries[it->second].second = value;  // Python keeps the first position
    return Status::Ok();
  }
  index.emplace(std::move(ks), target->entries.size());
  target->entries.emplace_back(key, value);
  return Status::Ok();
}

Status Machine::Append(PyNode* target, PyNode* value) {
  if (target->kind == PyKind::kList || target->kind == PyKind::kObject) {
    target->items.push_back(value);
    return Status::Ok();
  }
  return Corrupt("APPEND on a non-list");
}

Status Machine::PushGlobal(const std::string& raw_module, const std::string& name) {
  if (!ValidIdentifierPath(raw_module) || !ValidIdentifierPath(name)) {
    return Corrupt("GLOBAL with invalid name '" + Printable(raw_module) + " " +
                   Printable(name) + "'");
  }
  std::string module = NormaliseModule(raw_module);
  if (allowed_ != nullptr) {
    std::string path = module + "." + name;
    if (allowed_->count(path) == 0) {
      return Status::Unsupported("pickle: global '" + Printable(path) + "' at offset " +
                                 std::to_string(op_pos_) +
                                 " is not on the allow-list of this file's classes; nothing "
                                 "was imported or executed");
    }
    return Push(NewStr(std::move(path), PyKind::kGlobal));
  }
  RCKPT_RETURN_IF_ERROR(CheckGlobal(module, name, op_pos_));
  return Push(NewStr(module + "." + name, PyKind::kGlobal));
}

std::vector<PyNode*> ArgsOf(PyNode* args) {
  if (args != nullptr && args->kind == PyKind::kTuple) return args->items;
  return {};
}

bool IsClassLike(const std::string& path) {
  for (const char* c : kInertCallables) if (path == c) return true;
  size_t dot = path.rfind('.');
  string_view last = string_view(path).substr(dot == std::string::npos ? 0 : dot + 1);
  return !last.empty() && std::isupper(static_cast<unsigned char>(last[0]));
}

Result<PyNode*> Machine::PersistentLoad(PyNode* pid) {
  if (pid->kind != PyKind::kTuple || pid->items.empty() ||
      pid->items[0]->kind != PyKind::kStr || pid->items[0]->s != "storage") {
    return Status::Unsupported("pickle: persistent id at offset " + std::to_string(op_pos_) +
                               " is not a ('storage', ...) tuple; only storages are loaded");
  }
  if (pid->items.size() == 6) {
    return Status::Unsupported(
        "pickle: 6-field persistent id (pre-1.6 legacy format); re-save the file with "
        "torch >= 1.6");
  }
  const auto& a = pid->items;
  if (a.size() != 5 || a[1]->kind != PyKind::kGlobal || a[2]->kind != PyKind::kStr ||
      a[3]->kind != PyKind::kStr || a[4]->kind != PyKind::kInt || a[4]->i < 0) {
    return Corrupt("malformed storage persistent id (expected ('storage', type, key, "
                   "location, numel))");
  }
  PyNode* n = New(PyKind::kStorage);
  StorageRef& s = n->storage;
  s.type_name = a[1]->s;
  s.key = a[2]->s;
  s.location = a[3]->s;
  s.numel = static_cast<uint64_t>(a[4]->i);
  size_t dot = s.type_name.rfind('.');
  std::string cls = s.type_name.substr(dot + 1);
  if (cls == "UntypedStorage") {
    s.dtype.reset();
  } else {
    bool found = false;
    for (const auto& d : kDTypes) {
      if (cls == d.storage && *d.storage) {
        s.dtype = d.dtype;
        found = true;
      }
    }
    if (!found) {
      return Status::Unsupported("pickle: storage type '" + Printable(s.type_name) +
                                 "' at offset " + std::to_string(op_pos_) +
                                 " holds a dtype rckpt does not support");
    }
  }
  if (s.key.empty() || s.key.size() > 256 || s.key.find('/') != std::string::npos ||
      s.key.find('\0') != std::string::npos) {
    return Corrupt("storage key '" + Printable(s.key) + "' is not a valid record name");
  }
  return n;
}

Result<int64_t> IntArg(const PyNode* n) {
  if (n->kind == PyKind::kInt) return n->i;
  if (n->kind == PyKind::kBool) return static_cast<int64_t>(n->b);
  return Status::Corruption("pickle: expected an int");
}

Result<std::vector<int64_t>> IntTuple(const PyNode* n) {
  if (n->kind == PyKind::kKnown && n->s == "torch.Size" && n->args) n = n->args;
  if (n->kind != PyKind::kTuple && n->kind != PyKind::kList) {
    return Status::Corruption("pickle: expected a tuple of ints");
  }
  std::vector<int64_t> v;
  for (const PyNode* e : n->items) {
    RCKPT_ASSIGN_OR_RETURN(int64_t i, IntArg(e));
    v.push_back(i);
  }
  return v;
}

Result<PyNode*> Machine::RebuildTensor(const std::string& fn, const std::vector<PyNode*>& a) {
  size_t need = fn == "_rebuild_tensor" ? 4 : fn == "_rebuild_tensor_v3" ? 7 : 6;
  if (a.size() < need) {
    return Corrupt(fn + " called with " + std::to_string(a.size()) + " arguments, expected " +
                   std::to_string(need));
  }
  if (a[0]->kind != PyKind::kStorage) return Corrupt(fn + ": first argument is not a storage");
  PyNode* t = New(PyKind::kTensor);
  t->tensor.storage = a[0];
  auto off = IntArg(a[1]);
  auto size = IntTuple(a[2]);
  auto stride = IntTuple(a[3]);
  if (!off.ok() || !size.ok() || !stride.ok()) {
    return Corrupt(fn + ": offset, size or stride is not an int / tuple of ints");
  }
  t->tensor.offset = *off;
  t->tensor.size = *size;
  t->tensor.stride = *stride;
  size_t meta_index = need;
  if (fn == "_rebuild_tensor_v3") {
    if (a[6]->kind != PyKind::kGlobal || !StartsWith(a[6]->s, "torch.")) {
      return Corrupt(fn + ": dtype argument is not a torch dtype");
    }
    std::string name = a[6]->s.substr(6);
    auto dt = TorchDTypeFromName(name);
    if (!dt) {
      return Status::Unsupported("pickle: tensor dtype torch." + Printable(name) +
                                 " is not supported by rckpt");
    }
    t->tensor.dtype = *dt;
  } else {
    if (!a[0]->storage.dtype) {
      return Corrupt(fn + ": untyped storage without a dtype argument");
    }
    t->tensor.dtype = *a[0]->storage.dtype;
  }
  if (a.size() > meta_index && a[meta_index]->kind == PyKind::kDict) {
    for (const auto& [k, v] : a[meta_index]->entries) {
      if (v->kind == PyKind::kBool && v->b) {
        return Status::Unsupported(
            "pickle: tensor with math bit '" + Printable(k->kind == PyKind::kStr ? k->s : "?") +
            "' (conjugate/negative view) is not supported; call .resolve_conj()/.resolve_neg() "
            "before saving");
      }
    }
  }
  return t;
}

Result<PyNode*> Machine::Reduce(const std::string& path, PyNode* args_node) {
  std::vector<PyNode*> a = ArgsOf(args_node);
  if (path == "collections.OrderedDict" || path == "builtins.dict" ||
      path == "collections.Counter") {
    PyNode* d = New(PyKind::kDict);
    if (!a.empty() && (a[0]->kind == PyKind::kList || a[0]->kind == PyKind::kTuple)) {
      for (PyNode* pair : a[0]->items) {
        if (pair->kind != PyKind::kTuple || pair->items.size() != 2) {
          return Corrupt(path + " argument is not a sequence of pairs");
        }
        RCKPT_RETURN_IF_ERROR(SetItem(d, pair->items[0], pair->items[1]));
      }
    } else if (!a.empty() && a[0]->kind == PyKind::kDict) {
      for (auto& [k, v] : a[0]->entries) RCKPT_RETURN_IF_ERROR(SetItem(d, k, v));
    }
    return d;
  }
  if (path == "builtins.set" || path == "builtins.frozenset") {
    PyNode* s = New(PyKind::kSet);
    if (!a.empty()) {
      if (a[0]->kind != PyKind::kList && a[0]->kind != PyKind::kTuple &&
          a[0]->kind != PyKind::kSet) {
        return Corrupt(path + " argument is not a sequence");
      }
      s->items = a[0]->items;
    }
    return s;
  }
  if (path == "_codecs.encode" || path == "codecs.encode") {
    if (a.empty() || a[0]->kind != PyKind::kStr) return Corrupt("_codecs.encode without a str");
    std::string enc = a.size() > 1 && a[1]->kind == PyKind::kStr ? a[1]->s : "utf-8";
    std::transform(enc.begin(), enc.end(), enc.begin(), ::tolower);
    if (enc == "utf-8" || enc == "utf8") return NewStr(a[0]->s, PyKind::kBytes);
    if (enc != "latin1" && enc != "latin-1" && enc != "iso-8859-1") {
      return Status::Unsupported("pickle: _codecs.encode with encoding '" + Printable(enc) +
                                 "'");
    }
    // The str is UTF-8; each code point (all < 256) is one byte.
    std::string out;
    const std::string& s = a[0]->s;
    for (size_t i = 0; i < s.size();) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        i += 1;
      } else if ((c & 0xe0) == 0xc0 && i + 1 < s.size() && c <= 0xc3) {
        out.push_back(static_cast<char>(((c & 0x1f) << 6) | (s[i + 1] & 0x3f)));
        i += 2;
      } else {
        return Corrupt("latin-1 _codecs.encode of a code point above 255");
      }
    }
    return NewStr(std::move(out), PyKind::kBytes);
  }
  if (path == "builtins.bytes") {
    if (a.empty()) return NewStr("", PyKind::kBytes);
    if (a[0]->kind == PyKind::kBytes) return NewStr(a[0]->s, PyKind::kBytes);
    if (a[0]->kind == PyKind::kList) {
      std::string out;
      for (PyNode* e : a[0]->items) {
        if (e->kind != PyKind::kInt || e->i < 0 || e->i > 255) {
          return Corrupt("bytes() of a list with a non-byte value");
        }
        out.push_back(static_cast<char>(e->i));
      }
      return NewStr(std::move(out), PyKind::kBytes);
    }
    return Corrupt("unsupported bytes() arguments");
  }
  if (path == "builtins.bytearray") {
    PyNode* k = New(PyKind::kKnown);
    k->s = "builtins.bytearray";
    if (a.empty()) {
      k->args = NewStr("", PyKind::kBytes);
    } else if (a[0]->kind == PyKind::kBytes) {
      k->args = a[0];
    } else {
      // bytearray(str, 'latin-1'): same decoding as _codecs.encode.
      RCKPT_ASSIGN_OR_RETURN(k->args, Reduce("_codecs.encode", args_node));
    }
    return k;
  }
  if (path == "builtins.complex" || path == "torch.Size" || path == "torch.device" ||
      path == "torch.serialization._get_layout") {
    PyNode* k = New(PyKind::kKnown);
    k->s = path == "torch.serialization._get_layout" ? "torch.layout" : path;
    if (path == "torch.Size") {
      if (a.size() != 1) return Corrupt("torch.Size expects one argument");
      RCKPT_RETURN_IF_ERROR(IntTuple(a[0]).status().WithContext("torch.Size"));
      k->args = a[0];
      if (k->args->kind == PyKind::kList) {
        PyNode* t = New(PyKind::kTuple);
        t->items = k->args->items;
        k->args = t;
      }
    } else {
      k->args = args_node;
    }
    return k;
  }
  if (StartsWith(path, "torch._utils.") || StartsWith(path, "torch._tensor.")) {
    std::string fn = path.substr(path.rfind('.') + 1);
    if (fn == "_rebuild_tensor_v2" || fn == "_rebuild_tensor_v3" || fn == "_rebuild_tensor") {
      return RebuildTensor(fn, a);
    }
    if (fn == "_rebuild_parameter" || fn == "_rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != PyKind::kTensor) {
        return Corrupt(fn + ": first argument is not a tensor");
      }
      return a[0];
    }
    if (fn == "_rebuild_from_type_v2" || fn == "_rebuild_from_type") {
      if (a.size() < 3 || a[0]->kind != PyKind::kGlobal) {
        return Corrupt(fn + " with malformed arguments");
      }
      if (a[1]->kind == PyKind::kGlobal && a[1]->s != "torch.Tensor" &&
          a[1]->s != "torch._tensor.Tensor" && a[1]->s != "torch.nn.parameter.Parameter") {
        result_.warnings.push_back("tensor subclass " + a[1]->s +
                                   " imported as a plain tensor");
      }
      return Reduce(a[0]->s, a[2]);
    }
    return Status::Unsupported("pickle: " + fn +
                               " (quantized, sparse, meta, nested or device-only tensors) "
                               "is not supported by rckpt");
  }
  if (StartsWith(path, "torch.") && (path == "torch.storage._load_from_bytes")) {
    return Status::Unsupported(
        "pickle: torch.storage._load_from_bytes (a storage pickled with the legacy format "
        "inside the object) is not supported; re-save with torch.save");
  }
  if (path == "copyreg._reconstructor") {
    if (a.empty() || a[0]->kind != PyKind::kGlobal) {
      return Corrupt("copyreg._reconstructor without a class");
    }
    PyNode* o = New(PyKind::kObject);
    o->s = a[0]->s;
    NoteUnknown(o->s);
    PyNode* rest = New(PyKind::kTuple);
    rest->items.assign(a.begin() + 1, a.end());
    o->args = rest;
    return o;
  }
  if (!IsClassLike(path) && !(allowed_ != nullptr && allowed_->count(path))) {
    return Status::Unsupported("pickle: refusing to call '" + Printable(path) + "' at offset " +
                               std::to_string(op_pos_) +
                               ": a function outside the allowlist; nothing was executed");
  }
  PyNode* o = New(PyKind::kObject);
  o->s = path;
  o->args = args_node;
  NoteUnknown(path);
  return o;
}

Status Machine::Call(PyNode* callable, PyNode* args, bool newobj) {
  if (callable->kind != PyKind::kGlobal) {
    return Status::Unsupported("pickle: call of a computed value (not a global) at offset " +
                               std::to_string(op_pos_) + " refused; nothing was executed");
  }
  if (args->kind != PyKind::kTuple) return Corrupt("call arguments are not a tuple");
  if (callable->s == "builtins.getattr") {
    // Only reachable through an allow-list naming it: Python's enums pickle
    // as getattr(EnumClass, "MEMBER"). Kept as the global "EnumClass.MEMBER".
    const auto& a = args->items;
    if (newobj || a.size() != 2 || a[0]->kind != PyKind::kGlobal ||
        a[1]->kind != PyKind::kStr || !ValidIdentifierPath(a[1]->s) ||
        a[1]->s.find('.') != std::string::npos || a[1]->s[0] == '_') {
      return Status::Unsupported("pickle: getattr at offset " + std::to_string(op_pos_) +
                                 " is allowed only as getattr(<allowed class>, \"MEMBER\") "
                                 "(an enum member, no private or dunder name); nothing was "
                                 "executed");
    }
    return Push(NewStr(a[0]->s + "." + a[1]->s, PyKind::kGlobal));
  }
  if (newobj) {
    const std::string& path = callable->s;
    if (path == "collections.OrderedDict" || path == "builtins.dict" ||
        path == "builtins.set" || path == "builtins.list" || path == "collections.Counter" ||
        path == "torch.Size") {
      RCKPT_ASSIGN_OR_RETURN(PyNode * n, Reduce(path, args));
      return Push(n);
    }
    if (path == "builtins.object" || path == "builtins.tuple") {
      return Corrupt("NEWOBJ of " + path);
    }
    PyNode* o = New(PyKind::kObject);
    o->s = path;
    o->args = args;
    NoteUnknown(path);
    return Push(o);
  }
  RCKPT_ASSIGN_OR_RETURN(PyNode * n, Reduce(callable->s, args));
  return Push(n);
}

Status Machine::Build(PyNode* obj, PyNode* state) {
  switch (obj->kind) {
    case PyKind::kDict:
    case PyKind::kObject:
      obj->state = state;
      return Status::Ok();
    case PyKind::kTensor:
      if (!(state->kind == PyKind::kDict && state->entries.empty()) &&
          state->kind != PyKind::kNone) {
        result_.warnings.push_back("state set on a tensor by BUILD was dropped");
      }
      return Status::Ok();
    default:
      return Corrupt("BUILD on a value that takes no state");
  }
}

Result<PickleResult> Machine::Run() {
  if (data_.size() > limits_.max_pickle_bytes) {
    return Status::Corruption("pickle: " + std::to_string(data_.size()) +
                              " bytes exceed the limit of " +
                              std::to_string(limits_.max_pickle_bytes));
  }
  while (!stopped_) {
    if (pos_ >= data_.size()) {
      return Status::Corruption("pickle: truncated: no STOP before the end (" +
                                std::to_string(data_.size()) + " bytes)");
    }
    op_pos_ = pos_;
    uint8_t op = static_cast<uint8_t>(data_[pos_++]);
    RCKPT_RETURN_IF_ERROR(Dispatch(op));
  }
  if (stack_.size() != 1 || !marks_.empty()) {
    return Corrupt("STOP with " + std::to_string(stack_.size()) + " values and " +
                   std::to_string(marks_.size()) + " marks on the stack (expected 1 and 0)");
  }
  result_.root = stack_.back();
  result_.unknown_classes.assign(unknown_.begin(), unknown_.end());
  if (strict_ && !unknown_.empty()) {
    std::string list;
    for (const std::string& c : unknown_) list += (list.empty() ? "" : ", ") + c;
    return Status::Unsupported("pickle: strict import refuses classes outside the "
                               "recognised set: " + list);
  }
  return std::move(result_);
}


Status Machine::Dispatch(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      RCKPT_ASSIGN_OR_RETURN(uint64_t p, ReadUint(1, "PROTO"));
      if (p > 5) return Corrupt("unknown pickle protocol " + std::to_string(p));
      return Status::Ok();
    }
    case 0x95:  // FRAME
      return ReadUint(8, "FRAME").status();
    case '.':
      stopped_ = true;
      return Status::Ok();
    case '(':
      if (stack_.size() + marks_.size() >= limits_.max_stack_depth) {
        return Corrupt("stack depth exceeds the limit");
      }
      marks_.push_back(stack_.size());
      return Status::Ok();
    case '0':  // POP
      if (stack_.size() > MarkBase()) return Pop().status();
      if (!marks_.empty() && stack_.size() == marks_.back()) {
        marks_.pop_back();
        return Status::Ok();
      }
      return Corrupt("POP on an empty stack");
    case '1':  // POP_MARK
      return PopMark().status();
    case '2': {  // DUP
      RCKPT_ASSIGN_OR_RETURN(PyNode * t, Top());
      return Push(t);
    }
    case 'N':
      return Push(New(PyKind::kNone));
    case 0x88:
      return Push(NewBool(true));
    case 0x89:
      return Push(NewBool(false));
    case 'K': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t v, ReadUint(1, "BININT1"));
      return Push(NewInt(static_cast<int64_t>(v)));
    }
    case 'M': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t v, ReadUint(2, "BININT2"));
      return Push(NewInt(static_cast<int64_t>(v)));
    }
    case 'J': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t v, ReadUint(4, "BININT"));
      return Push(NewInt(static_cast<int32_t>(static_cast<uint32_t>(v))));
    }
    case 0x8a:    // LONG1
    case 0x8b: {  // LONG4
      RCKPT_ASSIGN_OR_RETURN(uint64_t n, ReadUint(op == 0x8a ? 1 : 4, "LONG length"));
      if (op == 0x8b && n > 0x7fffffff) return Corrupt("negative LONG4 length");
      RCKPT_ASSIGN_OR_RETURN(std::string b, ReadBytes(n, "LONG payload"));
      if (n == 0) return Push(NewInt(0));
      if (n <= 8) {
        uint64_t v = LoadLE(reinterpret_cast<const std::byte*>(b.data()), static_cast<int>(n));
        if (n < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) v |= ~0ull << (8 * n);
        return Push(NewInt(static_cast<int64_t>(v)));
      }
      // Minimise: drop redundant sign-extension bytes; fits int64 -> int.
      while (b.size() > 1) {
        uint8_t last = static_cast<uint8_t>(b.back());
        uint8_t prev = static_cast<uint8_t>(b[b.size() - 2]);
        if ((last == 0 && !(prev & 0x80)) || (last == 0xff && (prev & 0x80))) {
          b.pop_back();
        } else {
          break;
        }
      }
      if (b.size() <= 8) {
        uint64_t v = LoadLE(reinterpret_cast<const std::byte*>(b.data()),
                            static_cast<int>(b.size()));
        if (b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) v |= ~0ull << (8 * b.size());
        return Push(NewInt(static_cast<int64_t>(v)));
      }
      return Push(NewStr(std::move(b), PyKind::kBigInt));
    }
    case 'I':    // INT (text)
    case 'L': {  // LONG (text)
      RCKPT_ASSIGN_OR_RETURN(std::string t, ReadLine("INT"));
      if (op == 'I' && t == "00") return Push(NewBool(false));
      if (op == 'I' && t == "01") return Push(NewBool(true));
      if (!t.empty() && t.back() == 'L') t.pop_back();
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0' || errno == ERANGE) {
        return Status::Unsupported("pickle: text integer '" + Printable(t) + "' at offset " +
                                   std::to_string(op_pos_) + " is not an int64");
      }
      return Push(NewInt(v));
    }
    case 'G': {  // BINFLOAT, big-endian
      RCKPT_ASSIGN_OR_RETURN(std::string b, ReadBytes(8, "BINFLOAT"));
      uint64_t bits = 0;
      for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);
      PyNode* n = New(PyKind::kFloat);
      std::memcpy(&n->f, &bits, 8);
      return Push(n);
    }
    case 'F': {  // FLOAT (text)
      RCKPT_ASSIGN_OR_RETURN(std::string t, ReadLine("FLOAT"));
      char* end = nullptr;
      double d = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0') return Corrupt("bad FLOAT text");
      PyNode* n = New(PyKind::kFloat);
      n->f = d;
      return Push(n);
    }
    case 'X':     // BINUNICODE
    case 0x8c:    // SHORT_BINUNICODE
    case 0x8d:    // BINUNICODE8
    case 'T':     // BINSTRING (py2 str, decoded as UTF-8 like torch.load)
    case 'U':     // SHORT_BINSTRING
    case 'B':     // BINBYTES
    case 'C':     // SHORT_BINBYTES
    case 0x8e:    // BINBYTES8
    case 0x96: {  // BYTEARRAY8
      int width = (op == 0x8c || op == 'U' || op == 'C') ? 1
                  : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                             : 4;
      RCKPT_ASSIGN_OR_RETURN(uint64_t n, ReadUint(width, "string length"));
      if (op == 'T' && n > 0x7fffffff) return Corrupt("negative BINSTRING length");
      RCKPT_ASSIGN_OR_RETURN(std::string s, ReadBytes(n, "string payload"));
      PyKind kind = (op == 'B' || op == 'C' || op == 0x8e || op == 0x96) ? PyKind::kBytes
                                                                         : PyKind::kStr;
      PyNode* node = NewStr(std::move(s), kind);
      if (op == 0x96) {
        PyNode* k = New(PyKind::kKnown);
        k->s = "builtins.bytearray";
        k->args = node;
        node = k;
      }
      return Push(node);
    }
    case ']':
      return Push(New(PyKind::kList));
    case ')':
      return Push(New(PyKind::kTuple));
    case '}':
      return Push(New(PyKind::kDict));
    case 0x8f:
      return Push(New(PyKind::kSet));
    case 'l':    // LIST
    case 't':    // TUPLE
    case 0x91: {  // FROZENSET
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      PyNode* n = New(op == 'l' ? PyKind::kList : op == 't' ? PyKind::kTuple : PyKind::kSet);
      n->items = std::move(items);
      return Push(n);
    }
    case 0x85:
    case 0x86:
    case 0x87: {
      size_t k = op - 0x84;
      if (stack_.size() < MarkBase() + k) return Corrupt("stack underflow in TUPLE" +
                                                         std::to_string(k));
      PyNode* n = New(PyKind::kTuple);
      n->items.assign(stack_.end() - k, stack_.end());
      stack_.resize(stack_.size() - k);
      return Push(n);
    }
    case 'd': {  // DICT
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      if (items.size() % 2) return Corrupt("DICT with an odd number of items");
      PyNode* d = New(PyKind::kDict);
      for (size_t i = 0; i < items.size(); i += 2) {
        RCKPT_RETURN_IF_ERROR(SetItem(d, items[i], items[i + 1]));
      }
      return Push(d);
    }
    case 'a': {
      RCKPT_ASSIGN_OR_RETURN(PyNode * v, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * list, Top());
      return Append(list, v);
    }
    case 'e': {
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      RCKPT_ASSIGN_OR_RETURN(PyNode * list, Top());
      for (PyNode* v : items) RCKPT_RETURN_IF_ERROR(Append(list, v));
      return Status::Ok();
    }
    case 's': {
      RCKPT_ASSIGN_OR_RETURN(PyNode * v, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * k, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * d, Top());
      return SetItem(d, k, v);
    }
    case 'u': {
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      if (items.size() % 2) return Corrupt("SETITEMS with an odd number of items");
      RCKPT_ASSIGN_OR_RETURN(PyNode * d, Top());
      for (size_t i = 0; i < items.size(); i += 2) {
        RCKPT_RETURN_IF_ERROR(SetItem(d, items[i], items[i + 1]));
      }
      return Status::Ok();
    }
    case 0x90: {  // ADDITEMS
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      RCKPT_ASSIGN_OR_RETURN(PyNode * s, Top());
      if (s->kind != PyKind::kSet) return Corrupt("ADDITEMS on a non-set");
      s->items.insert(s->items.end(), items.begin(), items.end());
      return Status::Ok();
    }
    case 'c': {  // GLOBAL
      RCKPT_ASSIGN_OR_RETURN(std::string module, ReadLine("GLOBAL module"));
      RCKPT_ASSIGN_OR_RETURN(std::string name, ReadLine("GLOBAL name"));
      return PushGlobal(module, name);
    }
    case 0x93: {  // STACK_GLOBAL
      RCKPT_ASSIGN_OR_RETURN(PyNode * name, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * module, Pop());
      if (name->kind != PyKind::kStr || module->kind != PyKind::kStr) {
        return Corrupt("STACK_GLOBAL of non-strings");
      }
      return PushGlobal(module->s, name->s);
    }
    case 'i': {  // INST: module, name, MARK args
      RCKPT_ASSIGN_OR_RETURN(std::string module, ReadLine("INST module"));
      RCKPT_ASSIGN_OR_RETURN(std::string name, ReadLine("INST name"));
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      RCKPT_RETURN_IF_ERROR(PushGlobal(module, name));
      RCKPT_ASSIGN_OR_RETURN(PyNode * cls, Pop());
      PyNode* args = New(PyKind::kTuple);
      args->items = std::move(items);
      return Call(cls, args, false);
    }
    case 'o': {  // OBJ: MARK cls args...
      RCKPT_ASSIGN_OR_RETURN(std::vector<PyNode*> items, PopMark());
      if (items.empty()) return Corrupt("OBJ without a class");
      PyNode* args = New(PyKind::kTuple);
      args->items.assign(items.begin() + 1, items.end());
      return Call(items[0], args, false);
    }
    case 'R': {
      RCKPT_ASSIGN_OR_RETURN(PyNode * args, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * fn, Pop());
      return Call(fn, args, false);
    }
    case 0x81: {  // NEWOBJ
      RCKPT_ASSIGN_OR_RETURN(PyNode * args, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * cls, Pop());
      return Call(cls, args, true);
    }
    case 0x92: {  // NEWOBJ_EX
      RCKPT_ASSIGN_OR_RETURN(PyNode * kwargs, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * args, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * cls, Pop());
      if (kwargs->kind != PyKind::kDict) return Corrupt("NEWOBJ_EX kwargs not a dict");
      RCKPT_RETURN_IF_ERROR(Call(cls, args, true));
      if (!kwargs->entries.empty() && stack_.back()->kind == PyKind::kObject) {
        stack_.back()->state = kwargs;
      }
      return Status::Ok();
    }
    case 'b': {
      RCKPT_ASSIGN_OR_RETURN(PyNode * state, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * obj, Top());
      return Build(obj, state);
    }
    case 'Q': {  // BINPERSID
      if (allowed_ != nullptr) {
        return Status::Unsupported("pickle: persistent id at offset " +
                                   std::to_string(op_pos_) +
                                   " in a plain pickle (no storages belong here)");
      }
      RCKPT_ASSIGN_OR_RETURN(PyNode * pid, Pop());
      RCKPT_ASSIGN_OR_RETURN(PyNode * s, PersistentLoad(pid));
      return Push(s);
    }
    case 'h': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t i, ReadUint(1, "BINGET"));
      return Get(i);
    }
    case 'j': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t i, ReadUint(4, "LONG_BINGET"));
      return Get(i);
    }
    case 'g': {
      RCKPT_ASSIGN_OR_RETURN(std::string t, ReadLine("GET"));
      char* end = nullptr;
      unsigned long long i = std::strtoull(t.c_str(), &end, 10);
      if (t.empty() || *end) return Corrupt("bad GET index");
      return Get(i);
    }
    case 'q': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t i, ReadUint(1, "BINPUT"));
      return Put(i);
    }
    case 'r': {
      RCKPT_ASSIGN_OR_RETURN(uint64_t i, ReadUint(4, "LONG_BINPUT"));
      return Put(i);
    }
    case 'p': {
      RCKPT_ASSIGN_OR_RETURN(std::string t, ReadLine("PUT"));
      char* end = nullptr;
      unsigned long long i = std::strtoull(t.c_str(), &end, 10);
      if (t.empty() || *end) return Corrupt("bad PUT index");
      return Put(i);
    }
    case 0x94:  // MEMOIZE
      return Put(memo_.size());
    case 'S':
    case 'V':
      return Status::Unsupported("pickle: protocol-0 text string opcode '" +
                                 std::string(1, static_cast<char>(op)) + "' at offset " +
                                 std::to_string(op_pos_) + " is not supported");
    case 'P':
      return Status::Unsupported("pickle: text persistent id (PERSID) at offset " +
                                 std::to_string(op_pos_) + " is not supported");
    case 0x82:
    case 0x83:
    case 0x84:
      return Status::Unsupported("pickle: extension-registry opcode EXT at offset " +
                                 std::to_string(op_pos_) + " refused");
    case 0x97:
    case 0x98:
      return Status::Unsupported("pickle: out-of-band buffers (protocol 5) are not supported");
    default: {
      return Corrupt("unknown opcode 0x" + HexDigits(op, 2));
    }
  }
}

}  // namespace

std::optional<DType> TorchDTypeFromName(std::string_view name) {
  for (const auto& d : kDTypes) if (name == d.torch_name) return d.dtype;
  for (const auto& a : kDTypeAliases) {
    if (name == a.first) return TorchDTypeFromName(a.second);
  }
  return std::nullopt;
}

std::string_view TorchDTypeName(DType dtype) {
  for (const auto& d : kDTypes) if (d.dtype == dtype) return d.torch_name;
  return "";
}

std::string_view TorchStorageName(DType dtype) {
  for (const auto& d : kDTypes) if (d.dtype == dtype) return d.storage;
  return "";
}

Result<PickleResult> Unpickle(std::span<const std::byte> data, const PickleLimits& limits,
                              bool strict) {
  Machine m(data, limits, strict);
  return m.Run();
}

Result<PickleResult> UnpickleAllowed(std::span<const std::byte> data, const PickleLimits& limits,
                                     const std::set<std::string>& allowed) {
  Machine m(data, limits, false, &allowed);
  return m.Run();
}

Status FuzzUnpickle(std::span<const std::byte> data) {
  return Unpickle(data, PickleLimits{}, false).status();
}

}  // namespace rckpt::convert
