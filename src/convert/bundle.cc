#include "convert/bundle.h"

#include <algorithm>

#include "convert/json.h"
#include "util/json_writer.h"

namespace rckpt::convert {
namespace {

// `v` with every tensor and RNG reference renamed by `rename`.
template <typename F>
Value Renamed(const Value& v, const F& rename) {
  switch (v.kind()) {
    case ValueKind::kTensorRef: return Value::TensorRef(rename(v.as_string()));
    case ValueKind::kRngRef: return Value::RngRef(rename(v.as_string()));
    case ValueKind::kList:
    case ValueKind::kTuple:
    case ValueKind::kSet: {
      std::vector<Value> items;
      items.reserve(v.items().size());
      for (const Value& x : v.items()) items.push_back(Renamed(x, rename));
      return v.kind() == ValueKind::kList    ? Value::List(std::move(items))
             : v.kind() == ValueKind::kTuple ? Value::Tuple(std::move(items))
                                             : Value::Set(std::move(items));
    }
    case ValueKind::kMap: {
      std::vector<Value::Entry> entries;
      entries.reserve(v.entries().size());
      for (const auto& [k, x] : v.entries()) entries.emplace_back(k, Renamed(x, rename));
      return Value::Map(std::move(entries));
    }
    case ValueKind::kObject: return Value::Object(v.as_string(), Renamed(v.fields(), rename));
    default: return v;
  }
}

}  // namespace

Status AddBundlePart(Checkpoint* bundle, BundlePart part) {
  const std::string& key = part.key;
  if (key.empty() || key.find('.') != std::string::npos) {
    return Status::InvalidArgument("bundle: part key '" + key +
                                   "' must be non-empty and hold no '.'");
  }
  if (!bundle->Tree().is_null() && !bundle->Tree().is_map()) {
    return Status::InvalidArgument("bundle: the tree is not a map of parts");
  }
  if (bundle->Tree().is_map() && bundle->Tree().FindKey(Value(key)) != nullptr) {
    return Status::InvalidArgument("bundle: two parts under the key '" + key + "'");
  }
  const std::string prefix = key + ".";
  // Built on a copy, so that a failure leaves `bundle` as it was.
  Checkpoint out = *bundle;
  const Checkpoint& ck = part.checkpoint;
  for (const TensorEntry& t : ck.tensors()) {
    RCKPT_RETURN_IF_ERROR(out.AddTensor(part.section, prefix + t.name, t.tensor)
                              .WithContext("bundle: part '" + key + "'"));
    out.mutable_tensors().back().origin = t.origin;
  }
  if (!ck.sharded_tensors().empty()) {
    return Status::InvalidArgument("bundle: part '" + key + "' holds sharded tensors (load it "
                                   "whole first)");
  }
  for (const RngRecord& r : ck.rng()) {
    RCKPT_RETURN_IF_ERROR(out.AddRng(prefix + r.name, r.kind, r.bytes, r.origin)
                              .WithContext("bundle: part '" + key + "'"));
  }
  if (!ck.Metadata().empty()) {
    JsonWriter w;
    w.BeginObject();
    for (const auto& [k, v] : ck.Metadata()) w.Key(k).String(v);
    w.EndObject();
    out.Metadata()[std::string(kBundleMetadataPrefix) + key] = w.str();
  }
  if (out.Tree().is_null()) out.Tree() = Value::Map();
  out.Tree().entries().emplace_back(
      Value(key), Renamed(ck.Tree(), [&](const std::string& n) { return prefix + n; }));
  *bundle = std::move(out);
  return Status::Ok();
}

Result<Checkpoint> UnbundlePart(const Checkpoint& bundle, const std::string& key) {
  const Value* tree = bundle.Tree().is_map() ? bundle.Tree().FindKey(Value(key)) : nullptr;
  if (tree == nullptr) {
    return Status::NotFound("bundle: no part '" + key + "' in the tree");
  }
  const std::string prefix = key + ".";
  auto under = [&](const std::string& name) { return name.rfind(prefix, 0) == 0; };
  Checkpoint out;
  for (const TensorEntry& t : bundle.tensors()) {
    if (!under(t.name)) continue;
    RCKPT_RETURN_IF_ERROR(out.AddTensor(t.section, t.name.substr(prefix.size()), t.tensor, t.role));
    out.mutable_tensors().back().origin = t.origin;
  }
  for (const RngRecord& r : bundle.rng()) {
    if (!under(r.name)) continue;
    RCKPT_RETURN_IF_ERROR(out.AddRng(r.name.substr(prefix.size()), r.kind, r.bytes, r.origin));
  }
  out.Tree() = Renamed(*tree, [&](const std::string& n) {
    return under(n) ? n.substr(prefix.size()) : n;
  });
  auto meta = bundle.Metadata().find(std::string(kBundleMetadataPrefix) + key);
  if (meta != bundle.Metadata().end()) {
    auto json = ParseJson(meta->second, 2);
    bool ok = json.ok() && json->is_object();
    if (ok) {
      for (const auto& [k, v] : json->members) {
        if (!v.is_string()) ok = false;
        out.Metadata()[k] = v.text;
      }
    }
    if (!ok) {
      return Status::Corruption("bundle: metadata '" + meta->first +
                                "' is not a JSON object of strings");
    }
  }
  return out;
}

}  // namespace rckpt::convert
