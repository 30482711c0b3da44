#include "dict_layout.h"

namespace rckpt::libtorch {
namespace {

// Deeper than any state_dict; a malformed tree cannot exhaust the stack.
constexpr int kMaxDepth = 64;

// The entries of a dict as the tree holds one: a map, or the OrderedDict
// object Python writes for an OrderedDict with attributes (a state_dict and
// its _metadata), {"items": map, "state": ...}. nullptr for anything else.
const Value* DictOf(const Value& v) {
  if (v.is_map()) return &v;
  if (v.kind() == ValueKind::kObject && v.as_string() == "collections.OrderedDict" &&
      v.fields().is_map()) {
    const Value* items = v.fields().Find("items");
    if (items != nullptr && items->is_map()) return items;
  }
  return nullptr;
}

Status Flatten(const Value& dict, const std::string& prefix, int depth, SectionDict* out) {
  if (depth > kMaxDepth) {
    return Status::InvalidArgument("'" + prefix + "': dicts nested deeper than " +
                                   std::to_string(kMaxDepth) + " levels");
  }
  for (const auto& [k, v] : dict.entries()) {
    std::string key = prefix.empty() ? KeyComponent(k) : prefix + "." + KeyComponent(k);
    if (v.kind() == ValueKind::kTensorRef) {
      out->tensors.emplace_back(std::move(key), v.as_string());
    } else if (const Value* nested = DictOf(v)) {
      RCKPT_RETURN_IF_ERROR(Flatten(*nested, key, depth + 1, out));
    } else {
      out->others.push_back(std::move(key));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string TensorName(std::string_view section, std::string_view key) {
  std::string name(section);
  name += '.';
  name += key;
  return name;
}

Result<SectionDict> ReadSectionDict(const Value& tree, std::string_view section,
                                    std::span<const std::string> section_tensors) {
  SectionDict out;
  const Value* entry = tree.Find(section);
  if (entry == nullptr) {
    if (section_tensors.empty()) {
      return Status::NotFound("no section '" + std::string(section) + "'");
    }
    const std::string prefix = std::string(section) + ".";
    for (const std::string& name : section_tensors) {
      out.tensors.emplace_back(name.starts_with(prefix) ? name.substr(prefix.size()) : name, name);
    }
    return out;
  }
  const Value* dict = DictOf(*entry);
  if (dict == nullptr) {
    return Status::InvalidArgument("section '" + std::string(section) + "' holds " +
                                   (entry->kind() == ValueKind::kObject
                                        ? "an object of class " + entry->as_string()
                                        : "a " + std::string(ValueKindName(entry->kind()))) +
                                   ", not a dict of tensors");
  }
  RCKPT_RETURN_IF_ERROR(Flatten(*dict, "", 0, &out));
  return out;
}

}  // namespace rckpt::libtorch
