#include "rckpt/diff.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "format/collective_layout.h"

namespace rckpt {
namespace {

class Collector {
 public:
  explicit Collector(const DiffOptions& o) : o_(o) { report_.mode = o.mode; }
  void Add(std::string kind, std::string name, std::string detail) {
    ++report_.count;
    report_.identical = false;
    if (report_.differences.size() < o_.max_differences) {
      report_.differences.push_back({std::move(kind), std::move(name), std::move(detail)});
    }
  }
  void Skip(std::string what, std::string why) {
    report_.not_compared.push_back({std::move(what), std::move(why)});
  }
  DiffReport Take() { return std::move(report_); }

 private:
  const DiffOptions& o_;
  DiffReport report_;
};

double HalfToDouble(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(man), -24);
  else if (exp == 31) v = man ? std::nan("") : INFINITY;
  else v = std::ldexp(static_cast<double>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

double BF16ToDouble(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Component reader for the float dtypes tolerances apply to; nullptr for
// others (compared bit for bit).
using Reader = double (*)(const std::byte*);
Reader FloatReader(DType d, size_t* step) {
  switch (d) {
    case DType::kF64:
    case DType::kC128:
      *step = 8;
      return [](const std::byte* p) { double v; std::memcpy(&v, p, 8); return v; };
    case DType::kF32:
    case DType::kC64:
      *step = 4;
      return [](const std::byte* p) { float v; std::memcpy(&v, p, 4); return double(v); };
    case DType::kF16:
      *step = 2;
      return [](const std::byte* p) { uint16_t v; std::memcpy(&v, p, 2); return HalfToDouble(v); };
    case DType::kBF16:
      *step = 2;
      return [](const std::byte* p) { uint16_t v; std::memcpy(&v, p, 2); return BF16ToDouble(v); };
    default:
      return nullptr;
  }
}

bool Close(double a, double b, const DiffOptions& o) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  return std::fabs(a - b) <= o.atol + o.rtol * std::fabs(b);
}

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Bytes of a tensor, read as `dtype` (tolerances apply to float dtypes).
void CompareBytes(const std::string& name, DType dtype, std::span<const std::byte> a,
                  std::span<const std::byte> b, const DiffOptions& o, Collector& c) {
  const bool tolerant = o.atol > 0 || o.rtol > 0;
  size_t step = DTypeSize(dtype);
  Reader read = tolerant ? FloatReader(dtype, &step) : nullptr;
  uint64_t mismatched = 0, first = 0;
  double max_abs = 0;
  if (read == nullptr && std::memcmp(a.data(), b.data(), a.size()) == 0) return;
  for (size_t off = 0; off + step <= a.size(); off += step) {
    bool same;
    if (read) {
      double va = read(a.data() + off), vb = read(b.data() + off);
      same = Close(va, vb, o);
      if (!same && !std::isnan(va) && !std::isnan(vb)) max_abs = std::max(max_abs, std::fabs(va - vb));
    } else {
      same = std::memcmp(a.data() + off, b.data() + off, step) == 0;
    }
    if (!same && mismatched++ == 0) first = off / step;
  }
  if (mismatched == 0) return;
  std::string detail = std::to_string(mismatched) + " of " + std::to_string(a.size() / step) +
                       (read && step != DTypeSize(dtype) ? " components" : " elements") +
                       " differ, first at flat index " + std::to_string(first);
  if (read) detail += ", max |a-b| " + Num(max_abs);
  c.Add("tensor", name, detail);
}

bool IsByteState(const TensorEntry& t) {
  return t.tensor.dtype() == DType::kU8 && t.tensor.shape().size() == 1;
}

// Which parts of the two checkpoints the comparison covers.
struct Scope {
  bool tensor_attributes = true;  // sections and roles of tensors, the section list
  bool origins = true;
  bool rng = true;                // RNG records at all (false: tensors mode)
  bool rng_kinds = true;          // false: RNG records match uint8 tensors by name and bytes
  bool tree = true;
  bool key_order = true;
  bool containers = true;         // false: OrderedDict as its items, a collective tree as "common"
  bool metadata = true;
  bool layout_metadata = true;    // "rckpt." metadata keys
};

class Differ {
 public:
  Differ(const Checkpoint& a, const Checkpoint& b, const DiffOptions& o, const Scope& s,
         Collector& c)
      : a_(a), b_(b), o_(o), s_(s), c_(c) {}

  void Run() {
    PairRngWithTensors();
    CompareTensors();
    if (s_.rng) CompareRng();
    if (s_.tensor_attributes) CompareSections();
    if (s_.tree) CompareTrees();
    if (s_.metadata) CompareMetadata();
  }

 private:
  // Where RNG kinds are not compared (a side does not record them) or RNG
  // records are left out (tensors mode), an RNG record of one side and a
  // uint8 tensor of the same name on the other hold the same kind of thing:
  // such pairs are compared as bytes, or left out together.
  void PairRngWithTensors() {
    if (s_.rng_kinds && s_.rng) return;
    for (const RngRecord& r : a_.rng()) {
      const TensorEntry* t = b_.FindTensor(r.name);
      if (t != nullptr && IsByteState(*t) && b_.FindRng(r.name) == nullptr) {
        a_rng_b_tensor_.insert(r.name);
      }
    }
    for (const RngRecord& r : b_.rng()) {
      const TensorEntry* t = a_.FindTensor(r.name);
      if (t != nullptr && IsByteState(*t) && a_.FindRng(r.name) == nullptr) {
        b_rng_a_tensor_.insert(r.name);
      }
    }
  }

  void CompareTensors() {
    for (const auto& x : a_.tensors()) {
      if (b_rng_a_tensor_.count(x.name)) continue;
      const TensorEntry* y = b_.FindTensor(x.name);
      if (y == nullptr) {
        c_.Add("tensor", x.name, "only in A");
        continue;
      }
      if (s_.tensor_attributes) {
        if (x.section != y->section) {
          c_.Add("tensor", x.name, "section " + x.section + " vs " + y->section);
        }
        if (x.role != y->role) {
          c_.Add("tensor", x.name, "role " + std::string(RoleName(x.role)) + " vs " +
                                       std::string(RoleName(y->role)));
        }
      }
      if (s_.origins && !o_.ignore_devices && x.Origin() != y->Origin()) {
        c_.Add("tensor", x.name, "origin device " + x.Origin().ToString() + " vs " +
                                     y->Origin().ToString());
      }
      if (x.tensor.dtype() != y->tensor.dtype() || x.tensor.shape() != y->tensor.shape()) {
        c_.Add("tensor", x.name,
               std::string(DTypeName(x.tensor.dtype())) + ShapeToString(x.tensor.shape()) +
                   " vs " + std::string(DTypeName(y->tensor.dtype())) +
                   ShapeToString(y->tensor.shape()));
        continue;
      }
      CompareBytes(x.name, x.tensor.dtype(), x.tensor.host_bytes(), y->tensor.host_bytes(), o_,
                   c_);
    }
    for (const auto& y : b_.tensors()) {
      if (a_.FindTensor(y.name) == nullptr && !a_rng_b_tensor_.count(y.name)) {
        c_.Add("tensor", y.name, "only in B");
      }
    }
  }

  // An RNG state held as a record on one side and as a tensor on the other.
  void CompareRngWithTensor(const RngRecord& r, const TensorEntry& t, bool record_in_a) {
    std::span<const std::byte> rb(r.bytes), tb = t.tensor.host_bytes();
    if (rb.size() != tb.size() || std::memcmp(rb.data(), tb.data(), rb.size()) != 0) {
      c_.Add("rng", r.name, "state bytes differ (" +
                                std::to_string(record_in_a ? rb.size() : tb.size()) + " vs " +
                                std::to_string(record_in_a ? tb.size() : rb.size()) + " bytes)");
    }
    if (s_.origins && !o_.ignore_devices && r.origin != t.Origin()) {
      Device da = record_in_a ? r.origin : t.Origin(), db = record_in_a ? t.Origin() : r.origin;
      c_.Add("rng", r.name, "origin device " + da.ToString() + " vs " + db.ToString());
    }
  }

  void CompareRng() {
    for (const auto& x : a_.rng()) {
      if (a_rng_b_tensor_.count(x.name)) {
        CompareRngWithTensor(x, *b_.FindTensor(x.name), true);
        continue;
      }
      const RngRecord* y = b_.FindRng(x.name);
      if (y == nullptr) {
        c_.Add("rng", x.name, "only in A");
        continue;
      }
      if (s_.rng_kinds && x.kind != y->kind) {
        c_.Add("rng", x.name, "kind " + std::string(RngKindName(x.kind)) + " vs " +
                                  std::string(RngKindName(y->kind)));
      } else if (x.bytes != y->bytes) {
        c_.Add("rng", x.name, "state bytes differ (" + std::to_string(x.bytes.size()) + " vs " +
                                  std::to_string(y->bytes.size()) + " bytes)");
      }
      if (s_.origins && !o_.ignore_devices && x.origin != y->origin) {
        c_.Add("rng", x.name,
               "origin device " + x.origin.ToString() + " vs " + y->origin.ToString());
      }
    }
    for (const auto& y : b_.rng()) {
      if (b_rng_a_tensor_.count(y.name)) {
        CompareRngWithTensor(y, *a_.FindTensor(y.name), false);
        continue;
      }
      if (a_.FindRng(y.name) == nullptr) c_.Add("rng", y.name, "only in B");
    }
  }

  // The section lists. Sections that hold tensors are compared through
  // their tensors' sections and roles; those without tensors (a save
  // declares one for every top-level key, an import only where a tensor
  // is) describe no state, and only strict mode compares them.
  void CompareSections() {
    std::set<std::string> left_out;
    auto used = [](const Checkpoint& ck, const std::string& section) {
      for (const TensorEntry& t : ck.tensors()) {
        if (t.section == section) return true;
      }
      return false;
    };
    auto add = [&](const std::string& name, const std::string& detail) {
      if (s_.containers || used(a_, name) || used(b_, name)) {
        c_.Add("section", name, detail);
      } else {
        left_out.insert(name);
      }
    };
    for (const SectionInfo& x : a_.sections()) {
      const SectionInfo* y = b_.FindSection(x.name);
      if (y == nullptr) {
        add(x.name, "only in A");
      } else if (x.role != y->role) {
        add(x.name, "role " + std::string(RoleName(x.role)) + " vs " +
                        std::string(RoleName(y->role)));
      }
    }
    for (const SectionInfo& y : b_.sections()) {
      if (a_.FindSection(y.name) == nullptr) add(y.name, "only in B");
    }
    if (!left_out.empty()) {
      std::string list;
      for (const std::string& n : left_out) list += (list.empty() ? "" : ", ") + n;
      c_.Skip("sections without tensors", list +
                                              ": declared on one side only or with other "
                                              "roles; they hold no state (--strict compares them)");
    }
  }

  // The state a tree holds, without the containers around it (state mode):
  // a collective file's "common" map, whose per-rank trees go to `ranks`
  // (nullptr for any other file).
  const Value& StateOf(const Checkpoint& ck, const Value** ranks) const {
    *ranks = nullptr;
    const Value& tree = ck.Tree();
    if (s_.containers || SavedWorldSize(ck.Metadata()) == 0 || !tree.is_map()) return tree;
    const Value* common = tree.Find(kCommonTreeKey);
    if (common == nullptr || !common->is_map()) return tree;
    *ranks = tree.Find(kRanksTreeKey);
    return *common;
  }

  static bool Empty(const Value* v) {
    if (v == nullptr || v->is_null()) return true;
    if (v->is_sequence()) {
      for (const Value& x : v->items()) {
        if (!Empty(&x)) return false;
      }
      return true;
    }
    return v->is_map() && v->entries().empty();
  }

  void CompareTrees() {
    const Value *ranks_a, *ranks_b;
    const Value& ta = StateOf(a_, &ranks_a);
    const Value& tb = StateOf(b_, &ranks_b);
    CompareTree(ta, tb, "");
    if (ranks_a != nullptr && ranks_b != nullptr) {
      CompareTree(*ranks_a, *ranks_b, std::string(kRanksTreeKey));
    } else if (!Empty(ranks_a) || !Empty(ranks_b)) {
      c_.Skip("per-rank trees", std::string("only ") + (ranks_a ? "A" : "B") +
                                    " is a collective file; its state is compared as its "
                                    "\"common\" tree");
    }
    for (int side = 0; side < 2; ++side) {
      const size_t n = ordered_dict_state_[side];
      if (n == 0) continue;
      c_.Skip("OrderedDict attributes",
              "torch's _metadata of " + std::to_string(n) + " OrderedDict" + (n == 1 ? "" : "s") +
                  " in " + (side == 0 ? "A" : "B") +
                  ", where the other side holds a plain map; compared as " +
                  (n == 1 ? "its" : "their") + " items (--strict compares them)");
    }
  }

  // The items map of an OrderedDict object as importers keep one; nullptr
  // for any other value.
  static const Value* OrderedDictItems(const Value& v) {
    if (v.kind() != ValueKind::kObject || v.as_string() != "collections.OrderedDict" ||
        !v.fields().is_map()) {
      return nullptr;
    }
    const Value* items = v.fields().Find("items");
    return items != nullptr && items->is_map() ? items : nullptr;
  }

  // An OrderedDict object compared with a plain map (state mode) is
  // compared as its items; its attributes are counted as left out.
  const Value& Unwrap(const Value& v, const Value& other, int side) {
    const Value* items = OrderedDictItems(v);
    if (s_.containers || items == nullptr || OrderedDictItems(other) != nullptr) return v;
    const Value* state = v.fields().Find("state");
    if (state != nullptr && !state->is_null()) ++ordered_dict_state_[side];
    return *items;
  }

  bool SameRef(const Value& a, const Value& b) const {
    auto is_ref = [](const Value& v) {
      return v.kind() == ValueKind::kTensorRef || v.kind() == ValueKind::kRngRef;
    };
    return !s_.rng_kinds && is_ref(a) && is_ref(b) && a.as_string() == b.as_string();
  }

  void CompareTree(const Value& a_in, const Value& b_in, const std::string& path) {
    const Value& a = Unwrap(a_in, b_in, 0);
    const Value& b = Unwrap(b_in, a_in, 1);
    const std::string where = path.empty() ? "(root)" : path;
    if (SameRef(a, b)) return;
    if (a.kind() != b.kind()) {
      c_.Add("tree", where, std::string(ValueKindName(a.kind())) + " " + a.DebugString(80) +
                                " vs " + std::string(ValueKindName(b.kind())) + " " +
                                b.DebugString(80));
      return;
    }
    auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    switch (a.kind()) {
      case ValueKind::kFloat:
        if ((o_.atol > 0 || o_.rtol > 0) ? !Close(a.as_float(), b.as_float(), o_) : !(a == b)) {
          c_.Add("tree", where, a.DebugString(80) + " vs " + b.DebugString(80));
        }
        return;
      case ValueKind::kList:
      case ValueKind::kTuple:
      case ValueKind::kSet:
        if (a.items().size() != b.items().size()) {
          c_.Add("tree", where, std::to_string(a.items().size()) + " items vs " +
                                    std::to_string(b.items().size()));
          return;
        }
        for (size_t i = 0; i < a.items().size(); ++i) {
          CompareTree(a.items()[i], b.items()[i], child('[' + std::to_string(i) + ']'));
        }
        return;
      case ValueKind::kMap:
        if (s_.key_order) {
          CompareOrderedMaps(a, b, path);
        } else {
          CompareMapsByKey(a, b, path);
        }
        return;
      case ValueKind::kObject:
        if (a.as_string() != b.as_string()) {
          c_.Add("tree", where, "object " + a.as_string() + " vs " + b.as_string());
          return;
        }
        CompareTree(a.fields(), b.fields(), path);
        return;
      default:
        if (!(a == b)) c_.Add("tree", where, a.DebugString(80) + " vs " + b.DebugString(80));
    }
  }

  static std::string KeyText(const Value& k) {
    return k.kind() == ValueKind::kString ? k.as_string() : k.DebugString(40);
  }
  std::string Child(const std::string& path, const Value& key) const {
    return path.empty() ? KeyText(key) : path + "." + KeyText(key);
  }

  void CompareOrderedMaps(const Value& a, const Value& b, const std::string& path) {
    if (a.entries().size() != b.entries().size()) {
      c_.Add("tree", path.empty() ? "(root)" : path,
             std::to_string(a.entries().size()) + " entries vs " +
                 std::to_string(b.entries().size()));
    }
    size_t n = std::min(a.entries().size(), b.entries().size());
    for (size_t i = 0; i < n; ++i) {
      const auto& [ka, va] = a.entries()[i];
      const auto& [kb, vb] = b.entries()[i];
      if (!(ka == kb)) {
        c_.Add("tree", Child(path, ka), "key " + ka.DebugString(40) + " vs " +
                                            kb.DebugString(40) + " at position " +
                                            std::to_string(i));
        continue;
      }
      CompareTree(va, vb, Child(path, ka));
    }
  }

  void CompareMapsByKey(const Value& a, const Value& b, const std::string& path) {
    for (const auto& [k, va] : a.entries()) {
      const Value* vb = b.FindKey(k);
      if (vb == nullptr) {
        c_.Add("tree", Child(path, k), "only in A");
      } else {
        CompareTree(va, *vb, Child(path, k));
      }
    }
    for (const auto& [k, vb] : b.entries()) {
      if (a.FindKey(k) == nullptr) c_.Add("tree", Child(path, k), "only in B");
    }
  }

  void CompareMetadata() {
    auto skip = [&](const std::string& k) {
      return !s_.layout_metadata && k.rfind("rckpt.", 0) == 0;
    };
    std::set<std::string> layout_keys;
    for (const auto& [k, v] : a_.Metadata()) {
      if (skip(k)) {
        auto it = b_.Metadata().find(k);
        if (it == b_.Metadata().end() || it->second != v) layout_keys.insert(k);
        continue;
      }
      auto it = b_.Metadata().find(k);
      if (it == b_.Metadata().end()) c_.Add("metadata", k, "only in A");
      else if (it->second != v) c_.Add("metadata", k, "'" + v + "' vs '" + it->second + "'");
    }
    for (const auto& [k, v] : b_.Metadata()) {
      if (skip(k)) {
        auto it = a_.Metadata().find(k);
        if (it == a_.Metadata().end() || it->second != v) layout_keys.insert(k);
        continue;
      }
      if (!a_.Metadata().count(k)) c_.Add("metadata", k, "only in B");
    }
    if (!layout_keys.empty()) {
      std::string list;
      for (const std::string& k : layout_keys) list += (list.empty() ? "" : ", ") + k;
      c_.Skip("rckpt. metadata", list + ": how each file was written, not state "
                                        "(--strict compares them)");
    }
  }

  const Checkpoint& a_;
  const Checkpoint& b_;
  const DiffOptions& o_;
  const Scope& s_;
  Collector& c_;
  std::set<std::string> a_rng_b_tensor_;  // A's RNG record vs B's uint8 tensor
  std::set<std::string> b_rng_a_tensor_;  // B's RNG record vs A's uint8 tensor
  size_t ordered_dict_state_[2] = {0, 0};
};

// Which side's file lacks a part: "A does not record them", "B ...",
// "neither A nor B records them" (`them`: how the part is named).
std::string NotRecordedBy(bool in_a, bool in_b, std::string_view them = "them") {
  if (!in_a && !in_b) return "neither A nor B records " + std::string(them);
  return std::string(!in_a ? "A" : "B") + " does not record " + std::string(them);
}

// The scope of a state-mode comparison, listing in `c` what it leaves out
// (only what either checkpoint has something of).
Scope StateScope(const Checkpoint& a, const Checkpoint& b, const DiffOptions& o, Collector& c) {
  const Recorded& ra = o.a_records;
  const Recorded& rb = o.b_records;
  Scope s;
  s.containers = false;
  s.layout_metadata = false;
  const bool any_tensors = !a.tensors().empty() || !b.tensors().empty();
  const bool any_rng = !a.rng().empty() || !b.rng().empty();
  s.tensor_attributes = ra.sections && rb.sections;
  if (!s.tensor_attributes && (any_tensors || !a.sections().empty() || !b.sections().empty())) {
    c.Skip("sections and roles", NotRecordedBy(ra.sections, rb.sections) +
                                     "; the import derives them from key names");
  }
  s.origins = ra.origins && rb.origins;
  if (!s.origins && !o.ignore_devices && (any_tensors || any_rng)) {
    c.Skip("origin devices", NotRecordedBy(ra.origins, rb.origins));
  }
  s.rng_kinds = ra.rng_kinds && rb.rng_kinds;
  if (!s.rng_kinds && any_rng) {
    c.Skip("RNG kinds", NotRecordedBy(ra.rng_kinds, rb.rng_kinds) +
                            "; RNG records were compared by name and bytes, and with a uint8 "
                            "tensor of the same name where the other side holds one");
  }
  s.tree = ra.tree && rb.tree;
  if (!s.tree && (!a.Tree().is_null() || !b.Tree().is_null())) {
    c.Skip("state tree", NotRecordedBy(ra.tree, rb.tree, "one") +
                             "; the import builds a flat name -> tensor map");
  }
  s.key_order = ra.key_order && rb.key_order;
  if (s.tree && !s.key_order) {
    c.Skip("key order", NotRecordedBy(ra.key_order, rb.key_order, "it") +
                            "; maps were compared key by key");
  }
  s.metadata = ra.metadata && rb.metadata;
  if (!s.metadata && (!a.Metadata().empty() || !b.Metadata().empty())) {
    c.Skip("metadata", NotRecordedBy(ra.metadata, rb.metadata, "any"));
  }
  return s;
}

Scope TensorsScope(const Checkpoint& a, const Checkpoint& b, Collector& c) {
  Scope s;
  s.tensor_attributes = s.origins = s.rng = s.rng_kinds = s.tree = s.metadata = false;
  const char* why = "tensors mode compares tensor names, dtypes, shapes and bytes only";
  if (!a.tensors().empty() || !b.tensors().empty()) {
    c.Skip("sections and roles", why);
    c.Skip("origin devices", why);
  }
  if (!a.rng().empty() || !b.rng().empty()) {
    c.Skip("RNG records", std::string(why) + " (uint8 tensors holding an RNG state of the "
                                             "other side are left out too)");
  }
  if (!a.Tree().is_null() || !b.Tree().is_null()) c.Skip("state tree", why);
  if (!a.Metadata().empty() || !b.Metadata().empty()) c.Skip("metadata", why);
  return s;
}

}  // namespace

std::string_view DiffModeName(DiffMode mode) {
  switch (mode) {
    case DiffMode::kState: return "state";
    case DiffMode::kStrict: return "strict";
    case DiffMode::kTensors: return "tensors";
  }
  return "state";
}

Result<DiffReport> DiffCheckpoints(const Checkpoint& a, const Checkpoint& b, const DiffOptions& o) {
  if (o.atol < 0 || o.rtol < 0 || std::isnan(o.atol) || std::isnan(o.rtol)) {
    return Status::InvalidArgument("diff tolerances must be >= 0 (atol " + Num(o.atol) +
                                   ", rtol " + Num(o.rtol) + ")");
  }
  for (const Checkpoint* ck : {&a, &b}) {
    for (const auto& t : ck->tensors()) {
      if (!t.tensor.device().is_cpu()) {
        return Status::InvalidArgument("diff: tensor '" + t.name + "' is on " +
                                       t.tensor.device().ToString() + "; load to host first");
      }
    }
  }
  Collector c(o);
  Scope scope;  // strict: everything
  if (o.mode == DiffMode::kState) scope = StateScope(a, b, o, c);
  if (o.mode == DiffMode::kTensors) scope = TensorsScope(a, b, c);
  Differ(a, b, o, scope, c).Run();
  return c.Take();
}

}  // namespace rckpt
