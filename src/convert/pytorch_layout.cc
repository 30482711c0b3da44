#include "convert/pytorch_layout.h"

#include "convert/json.h"
#include "convert/tree_json.h"
#include "util/json_writer.h"

namespace rckpt::convert {
namespace {

constexpr int kLayoutVersion = 1;

Status Bad(const std::string& what) {
  return Status::Corruption("pytorch: record " + std::string(kPyTorchLayoutRecord) + ": " + what);
}

// The strings of a JSON array of `n` strings; nullopt otherwise.
std::optional<std::vector<std::string>> Strings(const Json& j, size_t n) {
  if (!j.is_array() || j.items.size() != n) return std::nullopt;
  std::vector<std::string> out;
  for (const Json& e : j.items) {
    if (!e.is_string()) return std::nullopt;
    out.push_back(e.text);
  }
  return out;
}

}  // namespace

std::string EncodePyTorchLayout(const PyTorchLayout& l) {
  JsonWriter w;
  w.BeginObject();
  w.Key("rckpt_layout").Int(kLayoutVersion);
  w.Key("pickle_crc32").Uint(l.pickle_crc32);
  w.Key("sections").BeginArray();
  for (const SectionInfo& s : l.sections) {
    w.BeginArray().String(s.name).String(RoleName(s.role)).EndArray();
  }
  w.EndArray();
  w.Key("tensors").BeginArray();
  for (const auto& t : l.tensors) {
    w.BeginArray().String(t.storage_key).String(t.name).String(t.section).String(RoleName(t.role));
    w.EndArray();
  }
  w.EndArray();
  if (!l.arrays.empty()) {  // only then: readers before NumPy arrays ignore the key
    w.Key("arrays").BeginArray();
    for (const auto& a : l.arrays) {
      w.BeginArray().String(a.path).String(a.name).String(a.section).String(RoleName(a.role));
      w.Uint(a.index).EndArray();
    }
    w.EndArray();
  }
  w.Key("rng").BeginArray();
  for (const auto& r : l.rng) {
    w.BeginArray().String(r.name).String(RngKindName(r.kind)).String(r.origin.ToString());
    if (r.storage_key) {
      w.String("storage").String(*r.storage_key);
    } else {
      w.String("path").String(r.path);
    }
    w.EndArray();
  }
  w.EndArray();
  w.Key("added_keys").BeginArray();
  for (const std::string& k : l.added_keys) w.String(k);
  w.EndArray();
  w.Key("tree_was_null").Bool(l.tree_was_null);
  std::vector<Value::Entry> meta;
  for (const auto& [k, v] : l.metadata) meta.emplace_back(Value(k), Value(v));
  std::string meta_json;
  AppendTreeJson(&meta_json, Value::Map(std::move(meta)));
  w.Key("metadata").Raw(meta_json);
  w.EndObject();
  return w.str();
}

Result<PyTorchLayout> DecodePyTorchLayout(std::string_view text) {
  auto parsed = ParseJson(text, 64);
  if (!parsed.ok()) return Bad(parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) return Bad("not a JSON object");
  const Json* version = j.Find("rckpt_layout");
  if (version == nullptr || version->AsInt() != kLayoutVersion) {
    return Status::Unsupported("pytorch: record " + std::string(kPyTorchLayoutRecord) +
                               ": rckpt_layout is not " + std::to_string(kLayoutVersion) +
                               " (written by a newer rckpt)");
  }
  PyTorchLayout l;
  const Json* crc = j.Find("pickle_crc32");
  if (crc == nullptr || !crc->AsUint() || *crc->AsUint() > UINT32_MAX) {
    return Bad("pickle_crc32 is not a 32-bit unsigned integer");
  }
  l.pickle_crc32 = static_cast<uint32_t>(*crc->AsUint());
  auto array = [&](const char* key) -> Result<const Json*> {
    const Json* a = j.Find(key);
    if (a == nullptr || !a->is_array()) return Bad(std::string(key) + " is not an array");
    return a;
  };
  RCKPT_ASSIGN_OR_RETURN(const Json* sections, array("sections"));
  for (const Json& e : sections->items) {
    auto s = Strings(e, 2);
    SectionInfo info;
    if (!s || !ParseRole((*s)[1], &info.role)) return Bad("malformed sections entry");
    info.name = (*s)[0];
    l.sections.push_back(std::move(info));
  }
  RCKPT_ASSIGN_OR_RETURN(const Json* tensors, array("tensors"));
  for (const Json& e : tensors->items) {
    auto s = Strings(e, 4);
    PyTorchLayout::TensorMeta t;
    if (!s || !ParseRole((*s)[3], &t.role)) return Bad("malformed tensors entry");
    t.storage_key = (*s)[0];
    t.name = (*s)[1];
    t.section = (*s)[2];
    l.tensors.push_back(std::move(t));
  }
  if (j.Find("arrays") != nullptr) {
    RCKPT_ASSIGN_OR_RETURN(const Json* arrays, array("arrays"));
    for (const Json& e : arrays->items) {
      std::optional<std::vector<std::string>> s;
      std::optional<uint64_t> index;
      if (e.is_array() && e.items.size() == 5) {
        index = e.items[4].AsUint();
        Json first = e;
        first.items.pop_back();
        s = Strings(first, 4);
      }
      PyTorchLayout::ArrayMeta a;
      if (!s || !index || !ParseRole((*s)[3], &a.role)) return Bad("malformed arrays entry");
      a.index = *index;
      a.path = (*s)[0];
      a.name = (*s)[1];
      a.section = (*s)[2];
      l.arrays.push_back(std::move(a));
    }
  }
  RCKPT_ASSIGN_OR_RETURN(const Json* rng, array("rng"));
  for (const Json& e : rng->items) {
    auto s = Strings(e, 5);
    PyTorchLayout::RngMeta r;
    if (!s || !ParseRngKind((*s)[1], &r.kind) || ((*s)[3] != "storage" && (*s)[3] != "path")) {
      return Bad("malformed rng entry");
    }
    auto origin = ParseRecordedDevice((*s)[2]);
    if (!origin.ok()) return Bad("rng entry '" + (*s)[0] + "': " + origin.status().message());
    r.name = (*s)[0];
    r.origin = *origin;
    if ((*s)[3] == "storage") {
      r.storage_key = (*s)[4];
    } else {
      r.path = (*s)[4];
    }
    l.rng.push_back(std::move(r));
  }
  RCKPT_ASSIGN_OR_RETURN(const Json* added, array("added_keys"));
  for (const Json& e : added->items) {
    if (!e.is_string()) return Bad("added_keys holds a non-string");
    l.added_keys.push_back(e.text);
  }
  const Json* was_null = j.Find("tree_was_null");
  if (was_null == nullptr || was_null->kind != Json::Kind::kBool) {
    return Bad("tree_was_null is not a boolean");
  }
  l.tree_was_null = was_null->b;
  const Json* meta = j.Find("metadata");
  if (meta == nullptr) return Bad("metadata is missing");
  auto m = TreeFromJson(*meta);
  if (!m.ok() || !m->is_map()) return Bad("metadata is not a map");
  for (const auto& [k, v] : m->entries()) {
    if (k.kind() != ValueKind::kString || v.kind() != ValueKind::kString) {
      return Bad("metadata holds a non-string key or value");
    }
    l.metadata[k.as_string()] = v.as_string();
  }
  return l;
}

}  // namespace rckpt::convert
