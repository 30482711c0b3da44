// Value: one node of a checkpoint's state tree, the non-tensor structure of a
// training run (optimizer hyper-parameters, controller scalars, metric
// histories, scheduler state, nested containers).
//
// A Value is null, bool, int (int64), float (double), string (UTF-8), bytes,
// big integer (beyond int64; little-endian two's complement bytes, as Python's
// int.to_bytes(..., 'little', signed=True)), a reference to a tensor or an
// RNG record of the same checkpoint (by name), a list, a tuple, a set, an
// ordered map whose keys are scalars or tuples of scalars, or an inert object
// (a class path and its fields; produced only by importers, never executed).
//
// Equality (operator==) is structural and exact: floats compare by bit
// pattern (so NaN payloads and -0.0 count), maps and sets compare in order.
//
// Thread-safety: a value type; no internal synchronisation.
#ifndef RCKPT_TREE_H_
#define RCKPT_TREE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rckpt {

enum class ValueKind : uint8_t {
  kNull = 0,
  kBool = 1,
  kInt = 2,
  kFloat = 3,
  kString = 4,
  kBytes = 5,
  kBigInt = 6,
  kTensorRef = 7,
  kRngRef = 8,
  kList = 9,
  kTuple = 10,
  kSet = 11,
  kMap = 12,
  kObject = 13,
};

std::string_view ValueKindName(ValueKind kind);

class Value {
 public:
  using Entry = std::pair<Value, Value>;

  Value() = default;  // null
  Value(std::nullptr_t) {}  // NOLINT
  Value(bool b) : kind_(ValueKind::kBool), i_(b) {}  // NOLINT
  template <typename I, std::enable_if_t<std::is_integral_v<I> &&
                                             !std::is_same_v<I, bool>, int> = 0>
  Value(I i) : kind_(ValueKind::kInt), i_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : kind_(ValueKind::kFloat), d_(d) {}  // NOLINT
  Value(float f) : kind_(ValueKind::kFloat), d_(f) {}   // NOLINT
  Value(std::string s) : kind_(ValueKind::kString), s_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : kind_(ValueKind::kString), s_(s) {}  // NOLINT
  Value(const char* s) : kind_(ValueKind::kString), s_(s) {}  // NOLINT

  static Value Bytes(std::string bytes);
  static Value BigInt(std::string le_twos_complement);
  static Value TensorRef(std::string tensor_name);
  static Value RngRef(std::string rng_name);
  static Value List(std::vector<Value> items = {});
  static Value Tuple(std::vector<Value> items = {});
  static Value Set(std::vector<Value> items = {});
  static Value Map(std::vector<Entry> entries = {});
  // An inert object: class path ("hippynn.experiment.metric_tracker.MetricTracker")
  // and its fields (usually a map, any Value allowed).
  static Value Object(std::string class_path, Value fields);

  ValueKind kind() const { return kind_; }
  bool is_null() const { return kind_ == ValueKind::kNull; }
  bool is_map() const { return kind_ == ValueKind::kMap; }
  bool is_sequence() const {  // list, tuple or set
    return kind_ == ValueKind::kList || kind_ == ValueKind::kTuple ||
           kind_ == ValueKind::kSet;
  }

  // Scalar accessors. REQUIRES: the matching kind (aborts otherwise).
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;
  // String payload of kString, kBytes, kBigInt, kTensorRef, kRngRef, and the
  // class path of kObject.
  const std::string& as_string() const;

  // Elements of a list, tuple or set; empty for other kinds.
  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& items() { return items_; }
  // Entries of a map; empty for other kinds.
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<Entry>& entries() { return entries_; }
  // Fields of an object. REQUIRES: kObject.
  const Value& fields() const;
  Value& fields();

  // Map access by string key. On a null value, operator[] first turns it into
  // an empty map; a missing key is appended with a null value.
  // REQUIRES: null or map.
  Value& operator[](std::string_view key);
  // Returns nullptr when this is not a map or the key is absent.
  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  const Value* FindKey(const Value& key) const;

  // Appends to a list/tuple/set (a null value becomes a list).
  void Append(Value v);
  size_t size() const;  // items or entries

  // Python-like rendering for inspect ("{'lr': 0.001, 'betas': (0.9, 0.999)}").
  std::string DebugString(size_t max_chars = 4096) const;

  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  ValueKind kind_ = ValueKind::kNull;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> items_;   // sequences; [0] holds an object's fields
  std::vector<Entry> entries_;
};

// A map key as one component of a tensor's name, the key path joined with
// '.' ("optimizer.state.0.exp_avg"): a string as is, an int in decimal,
// True / False / None, anything else as its DebugString(128). The importers,
// Python's rckpt and the libtorch adapter all name tensors with it, so a
// file written by one front end is read by name in the others.
std::string KeyComponent(const Value& key);

}  // namespace rckpt

#endif  // RCKPT_TREE_H_
