#include "rckpt/tree.h"

#include "util/hex.h"

#include <utility>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>

namespace rckpt {

std::string_view ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNull: return "null";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "string";
    case ValueKind::kBytes: return "bytes";
    case ValueKind::kBigInt: return "bigint";
    case ValueKind::kTensorRef: return "tensor";
    case ValueKind::kRngRef: return "rng";
    case ValueKind::kList: return "list";
    case ValueKind::kTuple: return "tuple";
    case ValueKind::kSet: return "set";
    case ValueKind::kMap: return "map";
    case ValueKind::kObject: return "object";
  }
  return "unknown";
}

#define RCKPT_STRING_KIND_FACTORY(Name, Kind)      \
  Value Value::Name(std::string s) {               \
    Value v(std::move(s));                         \
    v.kind_ = ValueKind::Kind;                     \
    return v;                                      \
  }
RCKPT_STRING_KIND_FACTORY(Bytes, kBytes)
RCKPT_STRING_KIND_FACTORY(BigInt, kBigInt)
RCKPT_STRING_KIND_FACTORY(TensorRef, kTensorRef)
RCKPT_STRING_KIND_FACTORY(RngRef, kRngRef)
#undef RCKPT_STRING_KIND_FACTORY

#define RCKPT_SEQ_KIND_FACTORY(Name, Kind)          \
  Value Value::Name(std::vector<Value> items) {     \
    Value v;                                        \
    v.kind_ = ValueKind::Kind;                      \
    v.items_ = std::move(items);                    \
    return v;                                       \
  }
RCKPT_SEQ_KIND_FACTORY(List, kList)
RCKPT_SEQ_KIND_FACTORY(Tuple, kTuple)
RCKPT_SEQ_KIND_FACTORY(Set, kSet)
#undef RCKPT_SEQ_KIND_FACTORY

Value Value::Map(std::vector<Entry> entries) {
  Value v;
  v.kind_ = ValueKind::kMap;
  v.entries_ = std::move(entries);
  return v;
}

Value Value::Object(std::string class_path, Value fields) {
  Value v;
  v.kind_ = ValueKind::kObject;
  v.s_ = std::move(class_path);
  v.items_.push_back(std::move(fields));
  return v;
}

bool Value::as_bool() const {
  if (kind_ != ValueKind::kBool) std::abort();
  return i_ != 0;
}
int64_t Value::as_int() const {
  if (kind_ != ValueKind::kInt) std::abort();
  return i_;
}
double Value::as_float() const {
  if (kind_ != ValueKind::kFloat) std::abort();
  return d_;
}
const std::string& Value::as_string() const {
  switch (kind_) {
    case ValueKind::kString: case ValueKind::kBytes: case ValueKind::kBigInt:
    case ValueKind::kTensorRef: case ValueKind::kRngRef: case ValueKind::kObject:
      return s_;
    default:
      std::abort();
  }
}
const Value& Value::fields() const {
  if (kind_ != ValueKind::kObject) std::abort();
  return items_[0];
}
Value& Value::fields() {
  if (kind_ != ValueKind::kObject) std::abort();
  return items_[0];
}

Value& Value::operator[](std::string_view key) {
  if (kind_ == ValueKind::kNull) kind_ = ValueKind::kMap;
  if (kind_ != ValueKind::kMap) std::abort();
  for (auto& [k, v] : entries_) {
    if (k.kind_ == ValueKind::kString && k.s_ == key) return v;
  }
  entries_.emplace_back(Value(key), Value());
  return entries_.back().second;
}

const Value* Value::Find(std::string_view key) const {
  if (kind_ != ValueKind::kMap) return nullptr;
  for (const auto& [k, v] : entries_) {
    if (k.kind_ == ValueKind::kString && k.s_ == key) return &v;
  }
  return nullptr;
}

Value* Value::Find(std::string_view key) {
  return const_cast<Value*>(std::as_const(*this).Find(key));
}

const Value* Value::FindKey(const Value& key) const {
  if (kind_ != ValueKind::kMap) return nullptr;
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Append(Value v) {
  if (kind_ == ValueKind::kNull) kind_ = ValueKind::kList;
  if (!is_sequence()) std::abort();
  items_.push_back(std::move(v));
}

size_t Value::size() const {
  if (kind_ == ValueKind::kMap) return entries_.size();
  if (is_sequence()) return items_.size();
  return 0;
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case ValueKind::kNull: return true;
    case ValueKind::kBool:
    case ValueKind::kInt: return a.i_ == b.i_;
    case ValueKind::kFloat: return std::memcmp(&a.d_, &b.d_, sizeof(double)) == 0;
    case ValueKind::kObject:
      return a.s_ == b.s_ && a.items_ == b.items_;
    case ValueKind::kList: case ValueKind::kTuple: case ValueKind::kSet:
      return a.items_ == b.items_;
    case ValueKind::kMap: return a.entries_ == b.entries_;
    default: return a.s_ == b.s_;
  }
}

namespace {

void AppendQuoted(std::string& out, const std::string& s) {
  out += '\'';
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      AppendEscapedByte(out, static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  out += '\'';
}

void Render(const Value& v, std::string& out, size_t max_chars) {
  if (out.size() > max_chars) return;
  switch (v.kind()) {
    case ValueKind::kNull: out += "None"; break;
    case ValueKind::kBool: out += v.as_bool() ? "True" : "False"; break;
    case ValueKind::kInt: out += std::to_string(v.as_int()); break;
    case ValueKind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d)) { out += "nan"; break; }
      if (std::isinf(d)) { out += d > 0 ? "inf" : "-inf"; break; }
      // The shortest text that reads back as the same double.
      char buf[32];
      auto res = std::to_chars(buf, buf + sizeof buf - 1, d);
      *res.ptr = '\0';
      out += buf;
      if (std::strpbrk(buf, ".en") == nullptr) out += ".0";
      break;
    }
    case ValueKind::kString: AppendQuoted(out, v.as_string()); break;
    case ValueKind::kBytes:
      out += "b<" + std::to_string(v.as_string().size()) + " bytes>";
      break;
    case ValueKind::kBigInt:
      out += "bigint<" + std::to_string(v.as_string().size()) + " bytes>";
      break;
    case ValueKind::kTensorRef: out += "tensor(" + v.as_string() + ")"; break;
    case ValueKind::kRngRef: out += "rng(" + v.as_string() + ")"; break;
    case ValueKind::kList: case ValueKind::kTuple: case ValueKind::kSet: {
      const char* open = v.kind() == ValueKind::kList ? "[" : v.kind() == ValueKind::kTuple ? "(" : "{";
      const char* close = v.kind() == ValueKind::kList ? "]" : v.kind() == ValueKind::kTuple ? ")" : "}";
      if (v.kind() == ValueKind::kSet && v.items().empty()) { out += "set()"; break; }
      out += open;
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        Render(v.items()[i], out, max_chars);
        if (out.size() > max_chars) return;
      }
      if (v.kind() == ValueKind::kTuple && v.items().size() == 1) out += ",";
      out += close;
      break;
    }
    case ValueKind::kMap:
      out += "{";
      for (size_t i = 0; i < v.entries().size(); ++i) {
        if (i) out += ", ";
        Render(v.entries()[i].first, out, max_chars);
        out += ": ";
        Render(v.entries()[i].second, out, max_chars);
        if (out.size() > max_chars) return;
      }
      out += "}";
      break;
    case ValueKind::kObject:
      out += "<" + v.as_string() + " ";
      Render(v.fields(), out, max_chars);
      out += ">";
      break;
  }
}

}  // namespace

std::string Value::DebugString(size_t max_chars) const {
  std::string out;
  Render(*this, out, max_chars);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

std::string KeyComponent(const Value& key) {
  switch (key.kind()) {
    case ValueKind::kString: return key.as_string();
    case ValueKind::kInt: return std::to_string(key.as_int());
    case ValueKind::kBool: return key.as_bool() ? "True" : "False";
    case ValueKind::kNull: return "None";
    default: return key.DebugString(128);
  }
}

}  // namespace rckpt
