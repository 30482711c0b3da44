#include "optimizer_layout.h"

#include <set>

#include "dict_layout.h"

namespace rckpt::libtorch {
namespace {

const Value* FindIn(const std::vector<std::pair<std::string, const Value*>>& entries,
                    std::string_view key) {
  for (const auto& [k, v] : entries) {
    if (k == key) return v;
  }
  return nullptr;
}

std::string KindOf(const Value& v) {
  return v.kind() == ValueKind::kObject ? "an object of class " + v.as_string()
                                        : "a " + std::string(ValueKindName(v.kind()));
}

Status Wrong(const std::string& where, std::string_view key, const Value& v,
             std::string_view expected) {
  return Status::InvalidArgument(where + "['" + std::string(key) + "'] is " + KindOf(v) +
                                 " (" + v.DebugString(64) + "), expected " +
                                 std::string(expected));
}

// The str-keyed entries of a dict value.
Status StrEntries(const Value& dict, const std::string& where,
                  std::vector<std::pair<std::string, const Value*>>* out) {
  for (const auto& [k, v] : dict.entries()) {
    if (k.kind() != ValueKind::kString) {
      return Status::InvalidArgument(where + " has the key " + k.DebugString(64) +
                                     ", expected str keys");
    }
    out->emplace_back(k.as_string(), &v);
  }
  return Status::Ok();
}

}  // namespace

const Value* OptimizerGroupLayout::Find(std::string_view key) const {
  return FindIn(options, key);
}

Result<double> OptimizerGroupLayout::Number(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Status::InvalidArgument(where + " has no '" + std::string(key) + "'");
  if (v->kind() == ValueKind::kFloat) return v->as_float();
  if (v->kind() == ValueKind::kInt) return static_cast<double>(v->as_int());
  return Wrong(where, key, *v, "a number");
}

Result<bool> OptimizerGroupLayout::Flag(std::string_view key, bool fallback) const {
  const Value* v = Find(key);
  if (v == nullptr || v->is_null()) return fallback;
  if (v->kind() == ValueKind::kBool) return v->as_bool();
  return Wrong(where, key, *v, "True or False");
}

Result<std::pair<double, double>> OptimizerGroupLayout::Pair(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Status::InvalidArgument(where + " has no '" + std::string(key) + "'");
  auto number = [](const Value& x, double* out) {
    if (x.kind() == ValueKind::kFloat) *out = x.as_float();
    else if (x.kind() == ValueKind::kInt) *out = static_cast<double>(x.as_int());
    else return false;
    return true;
  };
  std::pair<double, double> out;
  if ((v->kind() != ValueKind::kTuple && v->kind() != ValueKind::kList) || v->size() != 2 ||
      !number(v->items()[0], &out.first) || !number(v->items()[1], &out.second)) {
    return Wrong(where, key, *v, "a pair of numbers");
  }
  return out;
}

const Value* OptimizerParamLayout::Find(std::string_view key) const {
  return FindIn(fields, key);
}

Result<OptimizerLayout> ReadOptimizerLayout(const Value& tree, std::string_view section) {
  const std::string name(section);
  const Value* root = tree.Find(section);
  if (root == nullptr) return Status::NotFound("no section '" + name + "'");
  if (!root->is_map()) {
    return Status::InvalidArgument("section '" + name + "' holds " + KindOf(*root) +
                                   ", not an optimizer's state_dict");
  }
  const Value* state = root->Find("state");
  const Value* groups = root->Find("param_groups");
  if (state == nullptr || !state->is_map() || groups == nullptr ||
      groups->kind() != ValueKind::kList) {
    return Status::InvalidArgument(
        "section '" + name + "' is not an optimizer's state_dict: it needs a dict 'state' and "
        "a list 'param_groups' (its keys: " + root->DebugString(160) + ")");
  }
  OptimizerLayout out;
  std::set<int64_t> indices;
  for (size_t g = 0; g < groups->items().size(); ++g) {
    const Value& group = groups->items()[g];
    OptimizerGroupLayout& layout = out.groups.emplace_back();
    layout.where = name + ".param_groups[" + std::to_string(g) + "]";
    if (!group.is_map()) {
      return Status::InvalidArgument(layout.where + " is " + KindOf(group) + ", expected a dict");
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    RCKPT_RETURN_IF_ERROR(StrEntries(group, layout.where, &entries));
    const Value* params = nullptr;
    for (const auto& entry : entries) {
      if (entry.first == "params") params = entry.second;
      else layout.options.push_back(entry);
    }
    if (params == nullptr || params->kind() != ValueKind::kList) {
      return Status::InvalidArgument(layout.where + " has no list 'params'");
    }
    for (size_t i = 0; i < params->items().size(); ++i) {
      const Value& p = params->items()[i];
      const std::string at = layout.where + "['params'][" + std::to_string(i) + "]";
      if (p.kind() != ValueKind::kInt) {
        return Status::InvalidArgument(at + " is " + KindOf(p) + ", expected a parameter index");
      }
      if (!indices.insert(p.as_int()).second) {
        return Status::InvalidArgument(at + ": parameter index " + std::to_string(p.as_int()) +
                                       " appears twice in '" + name + "'");
      }
      layout.params.push_back(p.as_int());
    }
  }
  for (const auto& [k, v] : state->entries()) {
    OptimizerParamLayout& param = out.state.emplace_back();
    if (k.kind() != ValueKind::kInt) {
      return Status::InvalidArgument(name + ".state has the key " + k.DebugString(64) +
                                     ", expected parameter indices (int)");
    }
    param.index = k.as_int();
    param.where = TensorName(name + ".state", KeyComponent(k));
    if (indices.count(param.index) == 0) {
      return Status::InvalidArgument(param.where + ": no group of '" + name +
                                     ".param_groups' has parameter " +
                                     std::to_string(param.index));
    }
    if (!v.is_map()) {
      return Status::InvalidArgument(param.where + " is " + KindOf(v) + ", expected a dict");
    }
    RCKPT_RETURN_IF_ERROR(StrEntries(v, param.where, &param.fields));
  }
  return out;
}

}  // namespace rckpt::libtorch
