#include "checkpoint_compare.h"

#include <algorithm>
#include <cstring>

#include "rckpt/io.h"

namespace rckpt::testing {
namespace {

// Everything loaded to host memory, whatever the origins.
Result<Checkpoint> LoadToHost(const std::string& path) {
  LoadOptions options;
  options.map_location = MapLocation::To(Device::Cpu());
  return Load(path, options);
}

// The path of the first difference between two trees, with both values.
void DiffTree(const Value& a, const Value& b, const std::string& path,
              std::vector<std::string>& out) {
  if (a == b) return;
  auto both = [&] {
    return path + ": " + a.DebugString(200) + " vs " + b.DebugString(200);
  };
  if (a.kind() != b.kind()) {
    out.push_back("tree " + both());
    return;
  }
  if (a.is_map() && a.entries().size() == b.entries().size()) {
    for (size_t i = 0; i < a.entries().size(); ++i) {
      const auto& [ka, va] = a.entries()[i];
      const auto& [kb, vb] = b.entries()[i];
      std::string key = ka.DebugString(60);
      if (ka != kb) {
        out.push_back("tree " + path + ": key " + key + " vs " + kb.DebugString(60));
        return;
      }
      DiffTree(va, vb, path + "[" + key + "]", out);
    }
    return;
  }
  if (a.is_sequence() && a.items().size() == b.items().size()) {
    for (size_t i = 0; i < a.items().size(); ++i) {
      DiffTree(a.items()[i], b.items()[i], path + "[" + std::to_string(i) + "]", out);
    }
    return;
  }
  out.push_back("tree " + both());
}

std::string Where(const std::string& what, const std::string& name) {
  return what + " '" + name + "'";
}

void CompareCounts(const char* what, size_t a, size_t b, std::vector<std::string>& out) {
  if (a != b) {
    out.push_back(std::string(what) + " count " + std::to_string(a) + " vs " +
                  std::to_string(b));
  }
}

void CompareSections(const Checkpoint& a, const Checkpoint& b, std::vector<std::string>& out) {
  CompareCounts("section", a.sections().size(), b.sections().size(), out);
  for (const SectionInfo& s : a.sections()) {
    const SectionInfo* o = b.FindSection(s.name);
    if (o == nullptr) {
      out.push_back(Where("section", s.name) + " only in the first");
    } else if (o->role != s.role) {
      out.push_back(Where("section", s.name) + ": role " + std::string(RoleName(s.role)) +
                    " vs " + std::string(RoleName(o->role)));
    }
  }
}

void CompareTensors(const Checkpoint& a, const Checkpoint& b, std::vector<std::string>& out) {
  CompareCounts("tensor", a.tensors().size(), b.tensors().size(), out);
  for (const TensorEntry& t : a.tensors()) {
    const TensorEntry* o = b.FindTensor(t.name);
    std::string w = Where("tensor", t.name);
    if (o == nullptr) {
      out.push_back(w + " only in the first");
      continue;
    }
    if (t.section != o->section) out.push_back(w + ": section " + t.section + " vs " + o->section);
    if (t.role != o->role) {
      out.push_back(w + ": role " + std::string(RoleName(t.role)) + " vs " +
                    std::string(RoleName(o->role)));
    }
    if (t.tensor.dtype() != o->tensor.dtype() || t.tensor.shape() != o->tensor.shape()) {
      out.push_back(w + ": " + std::string(DTypeName(t.tensor.dtype())) +
                    ShapeToString(t.tensor.shape()) + " vs " +
                    std::string(DTypeName(o->tensor.dtype())) +
                    ShapeToString(o->tensor.shape()));
      continue;
    }
    std::span<const std::byte> x = t.tensor.host_bytes();
    std::span<const std::byte> y = o->tensor.host_bytes();
    if (x.size() != y.size() || !std::equal(x.begin(), x.end(), y.begin())) {
      size_t first = 0;
      while (first < std::min(x.size(), y.size()) && x[first] == y[first]) ++first;
      out.push_back(w + ": bytes differ (first at byte " + std::to_string(first) + ")");
    }
  }
  for (const TensorEntry& t : b.tensors()) {
    if (a.FindTensor(t.name) == nullptr) {
      out.push_back(Where("tensor", t.name) + " only in the second");
    }
  }
}

void CompareRng(const Checkpoint& a, const Checkpoint& b, bool ignore_devices,
                std::vector<std::string>& out) {
  CompareCounts("RNG record", a.rng().size(), b.rng().size(), out);
  for (const RngRecord& r : a.rng()) {
    const RngRecord* o = b.FindRng(r.name);
    std::string w = Where("RNG record", r.name);
    if (o == nullptr) {
      out.push_back(w + " only in the first");
      continue;
    }
    if (r.kind != o->kind) {
      out.push_back(w + ": kind " + std::string(RngKindName(r.kind)) + " vs " +
                    std::string(RngKindName(o->kind)));
    }
    if (r.bytes != o->bytes) out.push_back(w + ": state bytes differ");
    if (!ignore_devices && r.origin != o->origin) {
      out.push_back(w + ": origin " + r.origin.ToString() + " vs " + o->origin.ToString());
    }
  }
}

}  // namespace

Result<std::map<std::string, Device>> OriginDevices(const std::string& path) {
  LoadOptions options;
  options.map_location = MapLocation::To(Device::Cpu());
  RCKPT_ASSIGN_OR_RETURN(std::vector<Placement> plan, PlanLoad(path, options, 0));
  std::map<std::string, Device> origins;
  for (const Placement& p : plan) origins[p.name] = p.origin;
  return origins;
}

Result<std::vector<std::string>> CompareCheckpoints(const std::string& path_a,
                                                    const std::string& path_b,
                                                    bool ignore_devices) {
  RCKPT_ASSIGN_OR_RETURN(Checkpoint a, LoadToHost(path_a));
  RCKPT_ASSIGN_OR_RETURN(Checkpoint b, LoadToHost(path_b));
  std::vector<std::string> out;
  CompareSections(a, b, out);
  CompareTensors(a, b, out);
  CompareRng(a, b, ignore_devices, out);
  DiffTree(a.Tree(), b.Tree(), "", out);
  if (a.Metadata() != b.Metadata()) out.push_back("user metadata differs");

  if (!ignore_devices) {
    RCKPT_ASSIGN_OR_RETURN(auto origins_a, OriginDevices(path_a));
    RCKPT_ASSIGN_OR_RETURN(auto origins_b, OriginDevices(path_b));
    for (const auto& [name, device] : origins_a) {
      auto it = origins_b.find(name);
      if (it != origins_b.end() && it->second != device) {
        out.push_back(Where("origin of", name) + ": " + device.ToString() + " vs " +
                      it->second.ToString());
      }
    }
  }
  return out;
}

}  // namespace rckpt::testing
