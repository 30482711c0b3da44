#include "convert/tree_json.h"

#include "util/hex.h"
#include "util/json_writer.h"
#include "util/utf8.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace rckpt::convert {
namespace {

void Tagged(std::string* out, const char* tag, std::string_view payload_json) {
  *out += "{\"";
  *out += tag;
  *out += "\":";
  *out += payload_json;
  *out += '}';
}

std::string Quoted(std::string_view s) {
  std::string q;
  AppendJsonString(q, s);
  return q;
}

void AppendItems(std::string* out, const std::vector<Value>& items) {
  out->push_back('[');
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out->push_back(',');
    AppendTreeJson(out, items[i]);
  }
  out->push_back(']');
}

Status Bad(const std::string& what) {
  return Status::Corruption("tree json: " + what);
}

Result<std::vector<Value>> Items(const Json& j) {
  if (!j.is_array()) return Bad("expected an array");
  std::vector<Value> v;
  v.reserve(j.items.size());
  for (const Json& e : j.items) {
    RCKPT_ASSIGN_OR_RETURN(Value x, TreeFromJson(e));
    v.push_back(std::move(x));
  }
  return v;
}

}  // namespace

Result<std::string> HexDecode(std::string_view h) {
  if (h.size() % 2) return Bad("odd-length hex string");
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(h.size() / 2);
  for (size_t i = 0; i < h.size(); i += 2) {
    int a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0) return Bad("bad hex digit");
    out.push_back(static_cast<char>(a * 16 + b));
  }
  return out;
}

void AppendTreeJson(std::string* out, const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNull: *out += "null"; return;
    case ValueKind::kBool: *out += v.as_bool() ? "true" : "false"; return;
    case ValueKind::kInt: *out += std::to_string(v.as_int()); return;
    case ValueKind::kFloat: {
      double d = v.as_float();
      if (!std::isfinite(d)) {
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        std::string quoted = "\"";  // appended, not "\"" + a temporary: GCC 12's -O3 -Wrestrict
        quoted.append(HexDigits(bits, 16)).push_back('"');
        Tagged(out, "$float", quoted);
        return;
      }
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", d);
      *out += buf;
      if (std::strpbrk(buf, ".eE") == nullptr) *out += ".0";
      return;
    }
    case ValueKind::kString:
      if (IsValidUtf8(v.as_string())) {
        AppendJsonString(*out, v.as_string());
      } else {
        Tagged(out, "$str", Quoted(HexEncode(v.as_string())));
      }
      return;
    case ValueKind::kBytes: Tagged(out, "$bytes", Quoted(HexEncode(v.as_string()))); return;
    case ValueKind::kBigInt: Tagged(out, "$bigint", Quoted(HexEncode(v.as_string()))); return;
    case ValueKind::kTensorRef: Tagged(out, "$tensor", Quoted(v.as_string())); return;
    case ValueKind::kRngRef: Tagged(out, "$rng", Quoted(v.as_string())); return;
    case ValueKind::kList: AppendItems(out, v.items()); return;
    case ValueKind::kTuple:
    case ValueKind::kSet: {
      std::string inner;
      AppendItems(&inner, v.items());
      Tagged(out, v.kind() == ValueKind::kTuple ? "$tuple" : "$set", inner);
      return;
    }
    case ValueKind::kMap: {
      *out += "{\"$map\":[";
      bool first = true;
      for (const auto& [k, x] : v.entries()) {
        if (!first) out->push_back(',');
        first = false;
        out->push_back('[');
        AppendTreeJson(out, k);
        out->push_back(',');
        AppendTreeJson(out, x);
        out->push_back(']');
      }
      *out += "]}";
      return;
    }
    case ValueKind::kObject:
      *out += "{\"$object\":";
      AppendJsonString(*out, v.as_string());
      *out += ",\"fields\":";
      AppendTreeJson(out, v.fields());
      out->push_back('}');
      return;
  }
}

Result<Value> TreeFromJson(const Json& j) {
  switch (j.kind) {
    case Json::Kind::kNull: return Value();
    case Json::Kind::kBool: return Value(j.b);
    case Json::Kind::kNumber:
      if (j.IsInteger()) {
        auto i = j.AsInt();
        if (!i) return Bad("integer " + j.text.substr(0, 40) + " outside int64");
        return Value(*i);
      }
      return Value(j.AsDouble());
    case Json::Kind::kString: return Value(j.text);
    case Json::Kind::kArray: {
      RCKPT_ASSIGN_OR_RETURN(std::vector<Value> items, Items(j));
      return Value::List(std::move(items));
    }
    case Json::Kind::kObject: break;
  }
  if (const Json* cls = j.Find("$object")) {
    const Json* fields = j.Find("fields");
    if (!cls->is_string() || fields == nullptr || j.members.size() != 2) {
      return Bad("malformed $object");
    }
    RCKPT_ASSIGN_OR_RETURN(Value f, TreeFromJson(*fields));
    return Value::Object(cls->text, std::move(f));
  }
  if (j.members.size() != 1) return Bad("object without a single '$' tag");
  const std::string& tag = j.members[0].first;
  const Json& p = j.members[0].second;
  if (tag == "$tuple" || tag == "$set") {
    RCKPT_ASSIGN_OR_RETURN(std::vector<Value> items, Items(p));
    return tag == "$tuple" ? Value::Tuple(std::move(items)) : Value::Set(std::move(items));
  }
  if (tag == "$map") {
    if (!p.is_array()) return Bad("$map is not an array");
    std::vector<Value::Entry> entries;
    entries.reserve(p.items.size());
    for (const Json& e : p.items) {
      if (!e.is_array() || e.items.size() != 2) return Bad("$map entry is not a pair");
      RCKPT_ASSIGN_OR_RETURN(Value k, TreeFromJson(e.items[0]));
      RCKPT_ASSIGN_OR_RETURN(Value x, TreeFromJson(e.items[1]));
      entries.emplace_back(std::move(k), std::move(x));
    }
    return Value::Map(std::move(entries));
  }
  if (!p.is_string()) return Bad("tag " + tag.substr(0, 40) + " without a string payload");
  if (tag == "$tensor") return Value::TensorRef(p.text);
  if (tag == "$rng") return Value::RngRef(p.text);
  RCKPT_ASSIGN_OR_RETURN(std::string raw, HexDecode(p.text));
  if (tag == "$bytes") return Value::Bytes(std::move(raw));
  if (tag == "$bigint") return Value::BigInt(std::move(raw));
  if (tag == "$str") return Value(std::move(raw));
  if (tag == "$float") {
    if (raw.size() != 8) return Bad("$float is not 8 bytes");
    uint64_t bits = 0;
    for (char c : raw) bits = (bits << 8) | static_cast<unsigned char>(c);
    double d;
    std::memcpy(&d, &bits, 8);
    return Value(d);
  }
  return Bad("unknown tag '" + tag.substr(0, 40) + "'");
}

}  // namespace rckpt::convert
