#include "rckpt/diff.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>


namespace rckpt {
namespace {

class Collector {
 public:
  explicit Collector(const DiffOptions& o) : o_(o) {}
  void Add(std::string kind, std::string name, std::string detail) {
    ++report_.count;
    report_.identical = false;
    if (report_.differences.size() < o_.max_differences) {
      report_.differences.push_back({std::move(kind), std::move(name), std::move(detail)});
    }
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

void CompareBytes(const TensorEntry& x, const TensorEntry& y, const DiffOptions& o, Collector& c) {
  auto a = x.tensor.host_bytes();
  auto b = y.tensor.host_bytes();
  const bool tolerant = o.atol > 0 || o.rtol > 0;
  size_t step = DTypeSize(x.tensor.dtype());
  Reader read = tolerant ? FloatReader(x.tensor.dtype(), &step) : nullptr;
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
                       (read && step != DTypeSize(x.tensor.dtype()) ? " components" : " elements") +
                       " differ, first at flat index " + std::to_string(first);
  if (read) detail += ", max |a-b| " + Num(max_abs);
  c.Add("tensor", x.name, detail);
}

void CompareTree(const Value& a, const Value& b, const std::string& path, const DiffOptions& o,
                 Collector& c) {
  const std::string where = path.empty() ? "(root)" : path;
  if (a.kind() != b.kind()) {
    c.Add("tree", where, std::string(ValueKindName(a.kind())) + " " + a.DebugString(80) + " vs " +
                             std::string(ValueKindName(b.kind())) + " " + b.DebugString(80));
    return;
  }
  auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  switch (a.kind()) {
    case ValueKind::kFloat:
      if ((o.atol > 0 || o.rtol > 0) ? !Close(a.as_float(), b.as_float(), o) : !(a == b)) {
        c.Add("tree", where, a.DebugString(80) + " vs " + b.DebugString(80));
      }
      return;
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kSet:
      if (a.items().size() != b.items().size()) {
        c.Add("tree", where, std::to_string(a.items().size()) + " items vs " +
                                 std::to_string(b.items().size()));
        return;
      }
      for (size_t i = 0; i < a.items().size(); ++i) {
        CompareTree(a.items()[i], b.items()[i], child('[' + std::to_string(i) + ']'), o, c);
      }
      return;
    case ValueKind::kMap: {
      if (a.entries().size() != b.entries().size()) {
        c.Add("tree", where, std::to_string(a.entries().size()) + " entries vs " +
                                 std::to_string(b.entries().size()));
      }
      size_t n = std::min(a.entries().size(), b.entries().size());
      for (size_t i = 0; i < n; ++i) {
        const auto& [ka, va] = a.entries()[i];
        const auto& [kb, vb] = b.entries()[i];
        std::string key = ka.kind() == ValueKind::kString ? ka.as_string() : ka.DebugString(40);
        if (!(ka == kb)) {
          c.Add("tree", child(key), "key " + ka.DebugString(40) + " vs " + kb.DebugString(40) +
                                        " at position " + std::to_string(i));
          continue;
        }
        CompareTree(va, vb, child(key), o, c);
      }
      return;
    }
    case ValueKind::kObject:
      if (a.as_string() != b.as_string()) {
        c.Add("tree", where, "object " + a.as_string() + " vs " + b.as_string());
        return;
      }
      CompareTree(a.fields(), b.fields(), path, o, c);
      return;
    default:
      if (!(a == b)) c.Add("tree", where, a.DebugString(80) + " vs " + b.DebugString(80));
  }
}

}  // namespace

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
  for (const auto& x : a.tensors()) {
    const TensorEntry* y = b.FindTensor(x.name);
    if (y == nullptr) {
      c.Add("tensor", x.name, "only in A");
      continue;
    }
    if (x.section != y->section) c.Add("tensor", x.name, "section " + x.section + " vs " + y->section);
    if (x.role != y->role) {
      c.Add("tensor", x.name, "role " + std::string(RoleName(x.role)) + " vs " +
                                  std::string(RoleName(y->role)));
    }
    if (!o.ignore_devices && x.Origin() != y->Origin()) {
      c.Add("tensor", x.name, "origin device " + x.Origin().ToString() + " vs " +
                                  y->Origin().ToString());
    }
    if (x.tensor.dtype() != y->tensor.dtype() || x.tensor.shape() != y->tensor.shape()) {
      c.Add("tensor", x.name,
            std::string(DTypeName(x.tensor.dtype())) + ShapeToString(x.tensor.shape()) + " vs " +
                std::string(DTypeName(y->tensor.dtype())) + ShapeToString(y->tensor.shape()));
      continue;
    }
    CompareBytes(x, *y, o, c);
  }
  for (const auto& y : b.tensors()) {
    if (a.FindTensor(y.name) == nullptr) c.Add("tensor", y.name, "only in B");
  }
  for (const auto& x : a.rng()) {
    const RngRecord* y = b.FindRng(x.name);
    if (y == nullptr) {
      c.Add("rng", x.name, "only in A");
      continue;
    }
    if (x.kind != y->kind) {
      c.Add("rng", x.name, "kind " + std::string(RngKindName(x.kind)) + " vs " +
                               std::string(RngKindName(y->kind)));
    } else if (x.bytes != y->bytes) {
      c.Add("rng", x.name, "state bytes differ (" + std::to_string(x.bytes.size()) + " vs " +
                               std::to_string(y->bytes.size()) + " bytes)");
    }
    if (!o.ignore_devices && x.origin != y->origin) {
      c.Add("rng", x.name, "origin device " + x.origin.ToString() + " vs " + y->origin.ToString());
    }
  }
  for (const auto& y : b.rng()) {
    if (a.FindRng(y.name) == nullptr) c.Add("rng", y.name, "only in B");
  }
  CompareTree(a.Tree(), b.Tree(), "", o, c);
  for (const auto& [k, v] : a.Metadata()) {
    auto it = b.Metadata().find(k);
    if (it == b.Metadata().end()) c.Add("metadata", k, "only in A");
    else if (it->second != v) c.Add("metadata", k, "'" + v + "' vs '" + it->second + "'");
  }
  for (const auto& [k, v] : b.Metadata()) {
    if (!a.Metadata().count(k)) c.Add("metadata", k, "only in B");
  }
  return c.Take();
}

}  // namespace rckpt
