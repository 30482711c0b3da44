#include "format/tree_codec.h"

#include <cstring>
#include <limits>
#include <string>

namespace rckpt {
namespace {

bool IsStringKind(ValueKind k) {
  return k == ValueKind::kString || k == ValueKind::kBytes || k == ValueKind::kBigInt ||
         k == ValueKind::kTensorRef || k == ValueKind::kRngRef || k == ValueKind::kObject;
}

bool IsSequenceKind(ValueKind k) {
  return k == ValueKind::kList || k == ValueKind::kTuple || k == ValueKind::kSet;
}

// Children of a node in storage order: items, or key/value pairs, or the
// object's fields.
void Children(const Value& v, std::vector<const Value*>& out) {
  if (v.is_sequence()) {
    for (const auto& c : v.items()) out.push_back(&c);
  } else if (v.kind() == ValueKind::kMap) {
    for (const auto& [k, val] : v.entries()) {
      out.push_back(&k);
      out.push_back(&val);
    }
  } else if (v.kind() == ValueKind::kObject) {
    out.push_back(&v.fields());
  }
}

bool IsValidKey(const Value& k) {
  if (k.kind() == ValueKind::kTuple) {
    for (const auto& e : k.items()) {
      if (e.is_sequence() || e.is_map() || e.kind() == ValueKind::kObject) return false;
    }
    return true;
  }
  return !(k.is_sequence() || k.is_map() || k.kind() == ValueKind::kObject);
}

std::string At(size_t i) { return "state tree node " + std::to_string(i); }

}  // namespace

Result<FlatTree> EncodeTree(const Value& root) {
  FlatTree out;
  std::vector<const Value*> order{&root};
  std::vector<uint32_t> depth{0};
  std::vector<const Value*> kids;
  for (size_t i = 0; i < order.size(); ++i) {
    const Value& v = *order[i];
    FlatNode n;
    n.kind = static_cast<uint8_t>(v.kind());
    switch (v.kind()) {
      case ValueKind::kBool:
      case ValueKind::kInt: {
        int64_t x = v.kind() == ValueKind::kBool ? v.as_bool() : v.as_int();
        std::memcpy(&n.first, &x, 8);
        break;
      }
      case ValueKind::kFloat: {
        double d = v.as_float();
        std::memcpy(&n.first, &d, 8);
        break;
      }
      default: break;
    }
    if (IsStringKind(v.kind())) {
      const std::string& s = v.as_string();
      n.str_off = out.bytes.size();
      n.str_len = s.size();
      out.bytes.insert(out.bytes.end(), s.begin(), s.end());
    }
    kids.clear();
    Children(v, kids);
    if (!kids.empty()) {
      uint64_t count = v.kind() == ValueKind::kMap ? v.entries().size() : kids.size();
      if (count > std::numeric_limits<uint32_t>::max()) {
        return Status::InvalidArgument("state tree: a container has " + std::to_string(count) +
                                       " children, more than 2^32-1");
      }
      if (depth[i] + 1 > kMaxTreeDepth) {
        return Status::InvalidArgument("state tree: deeper than " +
                                       std::to_string(kMaxTreeDepth) + " levels");
      }
      n.count = static_cast<uint32_t>(count);
      n.first = order.size();
      for (const Value* k : kids) {
        order.push_back(k);
        depth.push_back(depth[i] + 1);
      }
    }
    if (v.kind() == ValueKind::kMap) {
      for (const auto& [k, val] : v.entries()) {
        if (!IsValidKey(k)) {
          return Status::InvalidArgument("state tree: a map key is a " +
                                         std::string(ValueKindName(k.kind())) +
                                         "; keys must be scalars or tuples of scalars");
        }
      }
    }
    out.nodes.push_back(n);
  }
  return out;
}

Result<Value> DecodeTree(std::span<const FlatNode> nodes, std::span<const uint8_t> bytes) {
  if (nodes.empty()) return Value();
  const size_t n = nodes.size();
  std::vector<uint32_t> depth(n, 0);
  uint64_t next = 1;
  for (size_t i = 0; i < n; ++i) {
    const FlatNode& fn = nodes[i];
    if (fn.kind > static_cast<uint8_t>(ValueKind::kObject)) {
      return Status::Corruption(At(i) + ": unknown kind " + std::to_string(fn.kind));
    }
    auto kind = static_cast<ValueKind>(fn.kind);
    if (IsStringKind(kind)) {
      if (fn.str_off > bytes.size() || fn.str_len > bytes.size() - fn.str_off) {
        return Status::Corruption(At(i) + ": payload [" + std::to_string(fn.str_off) + ", +" +
                                  std::to_string(fn.str_len) + ") passes the end of tree_bytes (" +
                                  std::to_string(bytes.size()) + ")");
      }
    }
    uint64_t children = 0;
    if (IsSequenceKind(kind)) children = fn.count;
    else if (kind == ValueKind::kMap) children = uint64_t{fn.count} * 2;
    else if (kind == ValueKind::kObject) children = 1;
    else if (fn.count != 0) {
      return Status::Corruption(At(i) + ": a " + std::string(ValueKindName(kind)) +
                                " has count " + std::to_string(fn.count) + ", expected 0");
    }
    if (kind == ValueKind::kObject && fn.count != 1) {
      return Status::Corruption(At(i) + ": an object has count " + std::to_string(fn.count) +
                                ", expected 1");
    }
    if (children == 0) continue;
    if (fn.first != next || fn.first <= i) {
      return Status::Corruption(At(i) + ": children start at " + std::to_string(fn.first) +
                                ", expected " + std::to_string(next) +
                                " (child ranges must be forward and contiguous)");
    }
    if (children > n - next) {
      return Status::Corruption(At(i) + ": " + std::to_string(children) +
                                " children pass the end of the node array (" + std::to_string(n) +
                                " nodes)");
    }
    if (depth[i] + 1 > kMaxTreeDepth) {
      return Status::Corruption(At(i) + ": tree deeper than " + std::to_string(kMaxTreeDepth));
    }
    for (uint64_t c = next; c < next + children; ++c) depth[c] = depth[i] + 1;
    next += children;
  }
  if (next != n) {
    return Status::Corruption("state tree: " + std::to_string(n - next) +
                              " nodes are not reachable from the root");
  }
  // Children always follow their parent, so building from the back sees
  // every child complete before its parent.
  std::vector<Value> values(n);
  for (size_t i = n; i-- > 0;) {
    const FlatNode& fn = nodes[i];
    auto kind = static_cast<ValueKind>(fn.kind);
    std::string payload;
    if (IsStringKind(kind)) {
      payload.assign(reinterpret_cast<const char*>(bytes.data()) + fn.str_off, fn.str_len);
    }
    Value v;
    switch (kind) {
      case ValueKind::kNull: break;
      case ValueKind::kBool: v = Value(fn.first != 0); break;
      case ValueKind::kInt: {
        int64_t x;
        std::memcpy(&x, &fn.first, 8);
        v = Value(x);
        break;
      }
      case ValueKind::kFloat: {
        double d;
        std::memcpy(&d, &fn.first, 8);
        v = Value(d);
        break;
      }
      case ValueKind::kString: v = Value(std::move(payload)); break;
      case ValueKind::kBytes: v = Value::Bytes(std::move(payload)); break;
      case ValueKind::kBigInt: v = Value::BigInt(std::move(payload)); break;
      case ValueKind::kTensorRef: v = Value::TensorRef(std::move(payload)); break;
      case ValueKind::kRngRef: v = Value::RngRef(std::move(payload)); break;
      case ValueKind::kList: case ValueKind::kTuple: case ValueKind::kSet: {
        std::vector<Value> items;
        items.reserve(fn.count);
        for (uint64_t c = 0; c < fn.count; ++c) items.push_back(std::move(values[fn.first + c]));
        v = kind == ValueKind::kList ? Value::List(std::move(items))
            : kind == ValueKind::kTuple ? Value::Tuple(std::move(items))
                                        : Value::Set(std::move(items));
        break;
      }
      case ValueKind::kMap: {
        std::vector<Value::Entry> entries;
        entries.reserve(fn.count);
        for (uint64_t c = 0; c < fn.count; ++c) {
          Value& key = values[fn.first + 2 * c];
          if (!IsValidKey(key)) {
            return Status::Corruption(At(fn.first + 2 * c) + ": a map key is a " +
                                      std::string(ValueKindName(key.kind())));
          }
          entries.emplace_back(std::move(key), std::move(values[fn.first + 2 * c + 1]));
        }
        v = Value::Map(std::move(entries));
        break;
      }
      case ValueKind::kObject:
        v = Value::Object(std::move(payload), std::move(values[fn.first]));
        break;
    }
    values[i] = std::move(v);
  }
  return std::move(values[0]);
}

}  // namespace rckpt
