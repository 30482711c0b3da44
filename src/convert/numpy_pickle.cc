#include "convert/numpy_pickle.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "convert/bytes.h"
#include "core/rng_layout.h"
#include "util/utf8.h"

namespace rckpt::convert {
namespace {

constexpr std::string_view kModules[] = {kNumpy1Module, kNumpy2Module};

bool IsStr(const PyNode* n, std::string_view s) {
  return n != nullptr && n->kind == PyKind::kStr && n->s == s;
}

// The global "<numpy module>.<submodule>.<name>" under either spelling.
bool IsNumpyGlobal(std::string_view path, std::string_view submodule, std::string_view name) {
  for (std::string_view m : kModules) {
    std::string full = std::string(m) + "." + std::string(submodule) + "." + std::string(name);
    if (path == full) return true;
  }
  return false;
}

const std::vector<PyNode*>* TupleItems(const PyNode* n) {
  if (n == nullptr || (n->kind != PyKind::kTuple && n->kind != PyKind::kList)) return nullptr;
  return &n->items;
}

std::optional<int64_t> IntOf(const PyNode* n) {
  if (n == nullptr) return std::nullopt;
  if (n->kind == PyKind::kInt) return n->i;
  if (n->kind == PyKind::kBool) return n->b ? 1 : 0;
  return std::nullopt;
}

// The bytes a node holds: bytes, or a bytearray (protocol 5's in-band buffer).
const std::string* BytesOf(const PyNode* n) {
  if (n == nullptr) return nullptr;
  if (n->kind == PyKind::kBytes) return &n->s;
  if (n->kind == PyKind::kKnown && n->s == "builtins.bytearray" && n->args != nullptr &&
      n->args->kind == PyKind::kBytes) {
    return &n->args->s;
  }
  return nullptr;
}

Status Damaged(const std::string& what) { return Status::Corruption("pickle: NumPy " + what); }

bool ValidSize(char kind, uint32_t size) {
  switch (kind) {
    case 'b': return size == 1;
    case 'i':
    case 'u': return size == 1 || size == 2 || size == 4 || size == 8;
    case 'f': return size == 2 || size == 4 || size == 8 || size == 12 || size == 16;
    case 'c': return size == 8 || size == 16 || size == 24 || size == 32;
    case 'm':
    case 'M': return size == 8;
    case 'S':
    case 'U': return true;
    default: return false;
  }
}

// A datetime unit as NumPy names it inside "datetime64[...]": an optional
// count, then letters ("ns", "25s", "us").
bool ValidUnit(std::string_view u) {
  size_t i = 0;
  while (i < u.size() && std::isdigit(static_cast<unsigned char>(u[i]))) ++i;
  if (i == u.size() || (i > 0 && u[0] == '0') || i > 9) return false;
  for (size_t j = i; j < u.size(); ++j) {
    if (!std::isalpha(static_cast<unsigned char>(u[j]))) return false;
  }
  return u.size() - i <= 7;
}

struct DTypeRead {
  NumpyDType dtype;
  bool swap = false;  // stored big-endian
};

// The dtype a numpy.dtype node builds. nullopt: not a dtype rckpt holds
// (objects, structured and void dtypes; strings unless `text`).
Result<std::optional<DTypeRead>> ReadDType(const PyNode* n, bool text) {
  if (n == nullptr || n->kind != PyKind::kObject || n->s != "numpy.dtype") {
    return std::optional<DTypeRead>();
  }
  const auto* args = TupleItems(n->args);
  if (args == nullptr || args->empty() || (*args)[0]->kind != PyKind::kStr) {
    return Damaged("dtype without a type string");
  }
  const std::string& type = (*args)[0]->s;
  if (type.empty() || std::string_view("biufcmMSU").find(type[0]) == std::string_view::npos) {
    return std::optional<DTypeRead>();
  }
  if ((type[0] == 'S' || type[0] == 'U') && !text) return std::optional<DTypeRead>();
  const std::string digits = type.substr(1);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Damaged("dtype '" + Printable(type) + "' does not exist");
  }
  DTypeRead r;
  r.dtype.kind = type[0];
  r.dtype.itemsize = static_cast<uint32_t>(std::stoul(digits)) * (type[0] == 'U' ? 4 : 1);
  if (!ValidSize(r.dtype.kind, r.dtype.itemsize)) {
    return Damaged("dtype '" + Printable(type) + "' does not exist");
  }
  const PyNode* st = n->state;
  if (st == nullptr) return std::optional<DTypeRead>(r);  // native byte order
  const auto* s = TupleItems(st);
  auto version = s != nullptr && !s->empty() ? IntOf((*s)[0]) : std::nullopt;
  if (s == nullptr || !version || !((*version == 3 && s->size() == 8) ||
                                    (*version == 4 && s->size() == 9))) {
    return Damaged("dtype '" + Printable(type) + "' state is not (3, order, ...) of 8 or (4, "
                   "order, ...) of 9 items");
  }
  const PyNode* order = (*s)[1];
  if (!(IsStr(order, "<") || IsStr(order, ">") || IsStr(order, "|") || IsStr(order, "="))) {
    return Damaged("dtype '" + Printable(type) + "' byte order is not one of < > | =");
  }
  if ((*s)[3]->kind != PyKind::kNone || (*s)[4]->kind != PyKind::kNone) {
    return std::optional<DTypeRead>();  // fields: structured
  }
  r.swap = order->s == ">" && r.dtype.itemsize > 1;
  if (r.dtype.kind == 'm' || r.dtype.kind == 'M') {
    // (metadata, (unit, count, 1, 1)) as the 9th item.
    const auto* meta = *version == 4 ? TupleItems((*s)[8]) : nullptr;
    const auto* unit = meta != nullptr && meta->size() == 2 ? TupleItems((*meta)[1]) : nullptr;
    auto count = unit != nullptr && unit->size() == 4 ? IntOf((*unit)[1]) : std::nullopt;
    if (!count || (*unit)[0]->kind != PyKind::kBytes || *count < 1 || *count > 999999999) {
      return Damaged("dtype '" + Printable(type) + "' has no readable datetime unit");
    }
    const std::string& name = (*unit)[0]->s;
    if (name != "generic") {
      r.dtype.unit = (*count == 1 ? "" : std::to_string(*count)) + name;
      if (!ValidUnit(r.dtype.unit)) {
        return Damaged("dtype '" + Printable(type) + "' has the datetime unit '" +
                       Printable(name) + "'");
      }
    }
  }
  return std::optional<DTypeRead>(r);
}

// Element order and byte order for the stored tensor: swaps each element
// (each half of a complex one) to little-endian, and reorders a Fortran-order
// array's elements into C order.
void CopyElements(const std::string& src, const DTypeRead& d, const Shape& shape, bool fortran,
                  std::byte* dst) {
  const uint32_t size = d.dtype.itemsize;
  uint64_t n = src.size() / std::max<uint32_t>(size, 1);
  if (!fortran || shape.size() < 2) {
    std::memcpy(dst, src.data(), src.size());
  } else {
    std::vector<int64_t> idx(shape.size(), 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t f = 0, stride = 1;
      for (size_t k = 0; k < shape.size(); ++k) {
        f += static_cast<uint64_t>(idx[k]) * stride;
        stride *= static_cast<uint64_t>(shape[k]);
      }
      std::memcpy(dst + i * size, src.data() + f * size, size);
      for (size_t k = shape.size(); k-- > 0;) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
  }
  if (!d.swap) return;
  const uint32_t part = d.dtype.kind == 'c' ? size / 2 : size;
  for (uint64_t i = 0; i < n; ++i) {
    std::byte* e = dst + i * size;
    for (uint32_t p = 0; p < size; p += part) std::reverse(e + p, e + p + part);
  }
}

Result<std::optional<NumpyArray>> BuildArray(const DTypeRead& d, const PyNode* shape_node,
                                             bool fortran, const PyNode* data_node) {
  const auto* dims = TupleItems(shape_node);
  if (dims == nullptr || dims->size() > 64) {
    return Damaged("array shape is not a tuple of at most 64 ints");
  }
  Shape shape;
  uint64_t numel = 1;
  for (const PyNode* e : *dims) {
    auto v = IntOf(e);
    if (!v || *v < 0) return Damaged("array shape holds something other than an int >= 0");
    if (!MulOk(numel, static_cast<uint64_t>(*v), &numel)) return Damaged("array size overflows");
    shape.push_back(*v);
  }
  const std::string* data = BytesOf(data_node);
  if (data == nullptr) {
    return Damaged("array of dtype " + d.dtype.Name() + " holds its data as something other "
                   "than bytes");
  }
  uint64_t nbytes;
  if (!MulOk(numel, d.dtype.itemsize, &nbytes) || nbytes != data->size()) {
    return Damaged("array of dtype " + d.dtype.Name() + " and " + std::to_string(numel) +
                   " elements holds " + std::to_string(data->size()) + " bytes, expected " +
                   std::to_string(numel) + " x " + std::to_string(d.dtype.itemsize));
  }
  Shape stored_shape = shape;
  if (d.dtype.AsBytes()) stored_shape.push_back(d.dtype.itemsize);
  RCKPT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(d.dtype.Stored(), stored_shape));
  if (nbytes > 0) CopyElements(*data, d, shape, fortran, t.mutable_host_bytes().data());
  return std::optional<NumpyArray>(NumpyArray{d.dtype, std::move(t)});
}

// The bits of an IEEE half as a double.
double HalfToDouble(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

uint16_t DoubleToHalf(double d) {
  float f = static_cast<float>(d);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;  // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // overflows to infinity
  if (abs < 0x38800000) {  // subnormal or zero: round to a multiple of 2^-24
    const float m = std::fabs(f) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(m));
  }
  // Round to nearest even on the 13 dropped mantissa bits.
  const uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded - 0x38000000) >> 13);
}

std::string LittleEndian(uint64_t v, int n) {
  std::string s;
  AppendLE(&s, v, n);
  return s;
}

// The minimal two's complement bytes of a non-negative 128-bit value.
std::string UnsignedBigInt(uint64_t lo, uint64_t hi) {
  std::string s = LittleEndian(lo, 8) + LittleEndian(hi, 8);
  while (s.size() > 1 && s.back() == 0 && !(static_cast<uint8_t>(s[s.size() - 2]) & 0x80)) {
    s.pop_back();
  }
  if (static_cast<uint8_t>(s.back()) & 0x80) s.push_back('\0');
  return s;
}

// A non-negative integer node below 2^(8 * n) (n <= 16) as n little-endian
// bytes; nullopt otherwise.
std::optional<std::string> UnsignedOf(const PyNode* v, int n) {
  std::string le;
  if (v->kind == PyKind::kInt) {
    if (v->i < 0) return std::nullopt;
    le = LittleEndian(static_cast<uint64_t>(v->i), 8);
  } else if (v->kind == PyKind::kBigInt) {
    le = v->s;
    if (le.empty() || (static_cast<uint8_t>(le.back()) & 0x80)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  while (le.size() > static_cast<size_t>(n)) {
    if (le.back() != 0) return std::nullopt;
    le.pop_back();
  }
  le.resize(n, '\0');
  return le;
}

// UCS-4 (NumPy's str_) as UTF-8 without the trailing NULs NumPy strips;
// nullopt for a code point UTF-8 cannot hold.
std::optional<std::string> Ucs4ToUtf8(std::string_view b) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i + 4 <= b.size(); i += 4) {
    cps.push_back(Load32(reinterpret_cast<const std::byte*>(b.data() + i)));
  }
  while (!cps.empty() && cps.back() == 0) cps.pop_back();
  std::string out;
  for (uint32_t c : cps) {
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return std::nullopt;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

std::optional<std::string> Utf8ToUcs4(std::string_view s) {
  if (!IsValidUtf8(s)) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    AppendLE(&out, cp, 4);
    i += n;
  }
  return out;
}

// A scalar's value from its (little-endian) bytes, as rckpt.save stores it.
Value ScalarValue(const NumpyDType& d, std::string b) {
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  auto as_double = [&](size_t off, uint32_t size) {
    if (size == 2) return HalfToDouble(static_cast<uint16_t>(LoadLE(p + off, 2)));
    if (size == 4) {
      float f;
      std::memcpy(&f, b.data() + off, 4);
      return static_cast<double>(f);
    }
    double v;
    std::memcpy(&v, b.data() + off, 8);
    return v;
  };
  switch (d.kind) {
    case 'b': return Value(b[0] != 0);
    case 'i':
    case 'm':
    case 'M': {
      uint64_t v = LoadLE(p, static_cast<int>(d.itemsize));
      if (d.itemsize < 8 && (v >> (8 * d.itemsize - 1)) & 1) v |= ~0ull << (8 * d.itemsize);
      return Value(static_cast<int64_t>(v));
    }
    case 'u': {
      const uint64_t v = LoadLE(p, static_cast<int>(d.itemsize));
      if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value(static_cast<int64_t>(v));
      }
      return Value::BigInt(UnsignedBigInt(v, 0));
    }
    case 'f':
      if (d.itemsize > 8) return Value::Bytes(std::move(b));
      return Value(as_double(0, d.itemsize));
    case 'c':
      if (d.itemsize > 16) return Value::Bytes(std::move(b));
      return Value::Tuple({Value(as_double(0, d.itemsize / 2)),
                           Value(as_double(d.itemsize / 2, d.itemsize / 2))});
    default: return Value();
  }
}

}  // namespace

std::string NumpyDType::Name() const {
  const std::string bits = std::to_string(8 * itemsize);
  switch (kind) {
    case 'b': return "bool";
    case 'i': return "int" + bits;
    case 'u': return "uint" + bits;
    case 'f': return "float" + bits;
    case 'c': return "complex" + bits;
    case 'M': return unit.empty() ? "datetime64" : "datetime64[" + unit + "]";
    case 'm': return unit.empty() ? "timedelta64" : "timedelta64[" + unit + "]";
    case 'S': return "bytes";
    case 'U': return "str";
    default: return "?";
  }
}

DType NumpyDType::Stored() const {
  switch (kind) {
    case 'b': return DType::kBool;
    case 'i':
      return itemsize == 1 ? DType::kI8 : itemsize == 2 ? DType::kI16
                                        : itemsize == 4 ? DType::kI32 : DType::kI64;
    case 'u':
      return itemsize == 1 ? DType::kU8 : itemsize == 2 ? DType::kI16
                                        : itemsize == 4 ? DType::kI32 : DType::kI64;
    case 'f':
      return itemsize == 2 ? DType::kF16 : itemsize == 4 ? DType::kF32
                                         : itemsize == 8 ? DType::kF64 : DType::kU8;
    case 'c': return itemsize == 8 ? DType::kC64 : itemsize == 16 ? DType::kC128 : DType::kU8;
    case 'm':
    case 'M': return DType::kI64;
    default: return DType::kU8;
  }
}

std::optional<NumpyDType> NumpyDTypeFromName(std::string_view name) {
  NumpyDType d;
  auto sized = [&](std::string_view prefix, char kind, int unit_bits) -> bool {
    if (name.substr(0, prefix.size()) != prefix) return false;
    std::string_view digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 3 || digits[0] == '0' ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    const int bits = std::stoi(std::string(digits));
    if (bits % unit_bits != 0) return false;
    d.kind = kind;
    d.itemsize = static_cast<uint32_t>(bits / 8);
    return ValidSize(kind, d.itemsize);
  };
  auto dated = [&](std::string_view prefix, char kind) -> bool {
    if (name.substr(0, prefix.size()) != prefix) return false;
    std::string_view rest = name.substr(prefix.size());
    d.kind = kind;
    d.itemsize = 8;
    if (rest.empty()) return true;
    if (rest.size() < 3 || rest.front() != '[' || rest.back() != ']') return false;
    d.unit = std::string(rest.substr(1, rest.size() - 2));
    return ValidUnit(d.unit);
  };
  if (name == "bool") {
    d.kind = 'b';
    d.itemsize = 1;
  } else if (!(sized("uint", 'u', 8) || sized("int", 'i', 8) || sized("float", 'f', 8) ||
               sized("complex", 'c', 8) || dated("datetime64", 'M') ||
               dated("timedelta64", 'm'))) {
    return std::nullopt;
  }
  if (d.Name() != name) return std::nullopt;
  return d;
}

bool IsNumpyArrayNode(const PyNode* n) {
  return n != nullptr && n->kind == PyKind::kObject &&
         (IsNumpyGlobal(n->s, "multiarray", "_reconstruct") ||
          IsNumpyGlobal(n->s, "numeric", "_frombuffer"));
}

bool IsNumpyScalarNode(const PyNode* n) {
  return n != nullptr && n->kind == PyKind::kObject && IsNumpyGlobal(n->s, "multiarray", "scalar");
}

Result<std::optional<NumpyArray>> ReadNumpyArray(const PyNode* n) {
  const auto* args = TupleItems(n->args);
  if (IsNumpyGlobal(n->s, "numeric", "_frombuffer")) {
    // _frombuffer(buffer, dtype, shape, order)
    if (args == nullptr || args->size() != 4) return Damaged("_frombuffer without 4 arguments");
    RCKPT_ASSIGN_OR_RETURN(std::optional<DTypeRead> d, ReadDType((*args)[1], false));
    if (!d) return std::optional<NumpyArray>();
    const PyNode* order = (*args)[3];
    if (!IsStr(order, "C") && !IsStr(order, "F")) {
      return Damaged("_frombuffer order is not 'C' or 'F'");
    }
    return BuildArray(*d, (*args)[2], order->s == "F", (*args)[0]);
  }
  // _reconstruct(ndarray, (0,), b'b'), then BUILD (1, shape, dtype, is_fortran, data).
  if (args == nullptr || args->empty() || (*args)[0]->kind != PyKind::kGlobal) {
    return Damaged("_reconstruct without a class");
  }
  if ((*args)[0]->s != kNdarrayClass) return std::optional<NumpyArray>();  // a subclass
  const auto* st = TupleItems(n->state);
  if (st == nullptr || (st->size() != 5 && st->size() != 4)) {
    return Damaged("array state is not (version, shape, dtype, is_fortran, data)");
  }
  const size_t base = st->size() == 5 ? 1 : 0;
  RCKPT_ASSIGN_OR_RETURN(std::optional<DTypeRead> d, ReadDType((*st)[base + 1], false));
  if (!d) return std::optional<NumpyArray>();
  auto fortran = IntOf((*st)[base + 2]);
  if (!fortran || *fortran < 0 || *fortran > 1) return Damaged("array is_fortran is not a bool");
  return BuildArray(*d, (*st)[base], *fortran == 1, (*st)[base + 3]);
}

Result<std::optional<Value>> ReadNumpyScalar(const PyNode* n) {
  const auto* args = TupleItems(n->args);
  if (args == nullptr || args->size() != 2) return Damaged("scalar without (dtype, data)");
  RCKPT_ASSIGN_OR_RETURN(std::optional<DTypeRead> d, ReadDType((*args)[0], true));
  if (!d) return std::optional<Value>();
  const std::string* data = BytesOf((*args)[1]);
  if (data == nullptr || data->size() != d->dtype.itemsize) {
    return Damaged("scalar of dtype " + d->dtype.Name() + " does not hold " +
                   std::to_string(d->dtype.itemsize) + " bytes");
  }
  std::string b = *data;
  if (d->swap && d->dtype.kind != 'U') {
    const uint32_t part = d->dtype.kind == 'c' ? d->dtype.itemsize / 2 : d->dtype.itemsize;
    for (uint32_t p = 0; p < b.size(); p += part) std::reverse(b.begin() + p, b.begin() + p + part);
  } else if (d->swap) {
    for (size_t p = 0; p + 4 <= b.size(); p += 4) std::reverse(b.begin() + p, b.begin() + p + 4);
  }
  Value value;
  if (d->dtype.kind == 'U') {
    auto s = Ucs4ToUtf8(b);
    if (!s) return std::optional<Value>();
    value = Value(std::move(*s));
  } else if (d->dtype.kind == 'S') {
    while (!b.empty() && b.back() == '\0') b.pop_back();
    value = Value::Bytes(std::move(b));
  } else {
    value = ScalarValue(d->dtype, std::move(b));
  }
  return std::optional<Value>(Value::Object(
      std::string(kNumpyScalarClass),
      Value::Map({{Value("dtype"), Value(d->dtype.Name())}, {Value("value"), std::move(value)}})));
}

namespace {

// The node at `path` ("1", "state.key") below a get_state() tuple or a
// .state dict; nullptr when absent.
const PyNode* FieldNode(const PyNode* root, const NumpyRngLayout& layout, std::string_view path) {
  if (layout.legacy) {
    const size_t i = static_cast<size_t>(path[0] - '0');
    return i < root->items.size() ? root->items[i] : nullptr;
  }
  const PyNode* cur = root;
  while (cur != nullptr && !path.empty()) {
    const size_t dot = path.find('.');
    const std::string_view key = path.substr(0, dot);
    const PyNode* next = nullptr;
    if (cur->kind == PyKind::kDict) {
      for (const auto& [k, v] : cur->entries) {
        if (IsStr(k, key)) next = v;
      }
    }
    cur = next;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return cur;
}

// Whether a dict holds exactly the keys `layout`'s paths name at `prefix`
// ("" the top, "state." below it), plus bit_generator at the top.
bool HasExactKeys(const PyNode* dict, const NumpyRngLayout& layout, std::string_view prefix) {
  if (dict == nullptr || dict->kind != PyKind::kDict || dict->state != nullptr) return false;
  std::vector<std::string> want;
  if (prefix.empty()) want.push_back("bit_generator");
  for (const NumpyRngField& f : layout.fields) {
    if (f.path.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = f.path.substr(prefix.size());
    std::string key(rest.substr(0, rest.find('.')));
    if (std::find(want.begin(), want.end(), key) == want.end()) want.push_back(key);
  }
  if (dict->entries.size() != want.size()) return false;
  for (const auto& [k, v] : dict->entries) {
    if (k->kind != PyKind::kStr ||
        std::find(want.begin(), want.end(), k->s) == want.end()) {
      return false;
    }
    if (k->s == "state" && prefix.empty() && !HasExactKeys(v, layout, "state.")) return false;
  }
  return true;
}

uint32_t FieldBytes(NumpyFieldType t) {
  switch (t) {
    case NumpyFieldType::kU32: return 4;
    case NumpyFieldType::kU64:
    case NumpyFieldType::kF64: return 8;
    case NumpyFieldType::kU128: return 16;
  }
  return 0;
}

}  // namespace

Result<std::optional<std::string>> ReadNumpyRng(const PyNode* n, const std::string& where,
                                                std::vector<std::string>* warnings,
                                                std::string* array_class) {
  const NumpyRngLayout* layout = nullptr;
  if (n->kind == PyKind::kTuple) {
    if (n->items.size() != 5 || !IsStr(n->items[0], "MT19937") ||
        !IsNumpyArrayNode(n->items[1])) {
      return std::optional<std::string>();
    }
    layout = &NumpyRngLayouts()[0];
  } else if (n->kind == PyKind::kDict) {
    const PyNode* name = nullptr;
    for (const auto& [k, v] : n->entries) {
      if (IsStr(k, "bit_generator") && v->kind == PyKind::kStr) name = v;
    }
    if (name == nullptr) return std::optional<std::string>();
    for (const NumpyRngLayout& l : NumpyRngLayouts()) {
      if (!l.legacy && l.bit_generator == name->s) layout = &l;
    }
    if (layout == nullptr || !HasExactKeys(n, *layout, "")) return std::optional<std::string>();
  } else {
    return std::optional<std::string>();
  }
  const std::string what = "'" + where + "' looks like NumPy's " +
                           (layout->legacy ? std::string("RandomState.get_state()")
                                           : std::string(layout->bit_generator) + " state");
  std::string rec(layout->bytes, '\0');
  std::memcpy(rec.data(), LittleEndian(layout->tag, 4).data(), 4);
  for (const NumpyRngField& f : layout->fields) {
    const PyNode* v = FieldNode(n, *layout, f.path);
    const uint32_t size = FieldBytes(f.type);
    auto refuse = [&](const std::string& why) {
      warnings->push_back(what + " but its '" + std::string(f.path) + "' " + why +
                          "; kept as data, not an RNG record");
      return std::optional<std::string>();
    };
    if (v == nullptr) return refuse("is missing");
    if (f.count > 1) {
      if (!IsNumpyArrayNode(v)) return refuse("is not an array");
      RCKPT_ASSIGN_OR_RETURN(std::optional<NumpyArray> a, ReadNumpyArray(v));
      if (!a || a->dtype.kind != 'u' || a->dtype.itemsize != size ||
          a->data.shape() != Shape{static_cast<int64_t>(f.count)}) {
        return refuse("is not a uint" + std::to_string(8 * size) + " array of " +
                      std::to_string(f.count));
      }
      std::memcpy(rec.data() + f.offset, a->data.host_bytes().data(), size * f.count);
      *array_class = v->s;
      continue;
    }
    if (f.type == NumpyFieldType::kF64) {
      if (v->kind != PyKind::kFloat) return refuse("is not a float");
      std::memcpy(rec.data() + f.offset, &v->f, 8);
      continue;
    }
    auto le = UnsignedOf(v, static_cast<int>(size));
    if (!le) return refuse("is not an int of " + std::to_string(8 * size) + " bits");
    if (f.max != 0 && LoadLE(reinterpret_cast<const std::byte*>(le->data()), 4) > f.max) {
      return refuse("is outside 0.." + std::to_string(f.max));
    }
    std::memcpy(rec.data() + f.offset, le->data(), size);
  }
  return std::optional<std::string>(std::move(rec));
}

// Writers.

namespace {

std::string TypeString(const NumpyDType& d) {
  return std::string(1, d.kind) + std::to_string(d.kind == 'U' ? d.itemsize / 4 : d.itemsize);
}

void WriteDType(PickleWriter& p, std::string_view module, const NumpyDType& d) {
  p.Global("numpy", "dtype");
  p.Str(TypeString(d));
  p.Bool(false);
  p.Bool(true);
  p.Op(0x87);  // TUPLE3
  p.Op('R');
  const bool dated = d.kind == 'm' || d.kind == 'M';
  const bool text = d.kind == 'S' || d.kind == 'U';
  p.Mark();
  p.Int(dated ? 4 : 3);
  p.Str(d.kind == 'U' ? "<" : (d.itemsize == 1 || d.kind == 'S') ? "|" : "<");
  p.None();
  p.None();
  p.None();
  p.Int(text ? static_cast<int64_t>(d.itemsize) : -1);
  p.Int(d.kind == 'U' ? 4 : d.kind == 'S' ? 1 : -1);
  p.Int(text ? 8 : 0);
  if (dated) {
    // (metadata, (unit, count, 1, 1)); NumPy 1 writes {} where 2 writes None.
    if (module == kNumpy1Module) {
      p.Op('}');
    } else {
      p.None();
    }
    size_t digits = 0;
    while (digits < d.unit.size() && std::isdigit(static_cast<unsigned char>(d.unit[digits]))) {
      ++digits;
    }
    p.Mark();
    p.Bytes(d.unit.empty() ? "generic" : d.unit.substr(digits));
    p.Int(digits == 0 ? 1 : std::stoll(d.unit.substr(0, digits)));
    p.Int(1);
    p.Int(1);
    p.Op('t');
    p.Op(0x86);  // TUPLE2
  }
  p.Op('t');
  p.Op('b');
}

}  // namespace

void WriteNumpyArray(PickleWriter& p, std::string_view module, const NumpyDType& dtype,
                     std::span<const int64_t> shape, std::span<const std::byte> data) {
  p.Global(std::string(module) + ".multiarray", "_reconstruct");
  p.Global("numpy", "ndarray");
  p.Int(0);
  p.Op(0x85);  // TUPLE1
  p.Bytes("b");
  p.Op(0x87);
  p.Op('R');
  p.Mark();
  p.Int(1);
  p.Mark();
  for (int64_t d : shape) p.Int(d);
  p.Op('t');
  WriteDType(p, module, dtype);
  p.Bool(false);
  p.Bytes(AsChars(data));
  p.Op('t');
  p.Op('b');
}

std::optional<std::string> NumpyArrayTensorName(const Value& fields) {
  if (!fields.is_map() || fields.entries().size() != 2) return std::nullopt;
  const Value* name = fields.Find(std::string_view("dtype"));
  const Value* data = fields.Find(std::string_view("data"));
  if (name == nullptr || data == nullptr || name->kind() != ValueKind::kString ||
      data->kind() != ValueKind::kTensorRef || !NumpyDTypeFromName(name->as_string())) {
    return std::nullopt;
  }
  return data->as_string();
}

Status CheckNumpyArrayValue(const Value& fields, const Tensor& data) {
  const NumpyDType dtype = *NumpyDTypeFromName(fields.Find(std::string_view("dtype"))->as_string());
  const std::string what = "a numpy.ndarray of dtype " + dtype.Name();
  if (data.dtype() != dtype.Stored()) {
    return Status::InvalidArgument(what + " holds a " + std::string(DTypeName(data.dtype())) +
                                   " tensor, expected " + std::string(DTypeName(dtype.Stored())));
  }
  if (dtype.AsBytes() && (data.shape().empty() || data.shape().back() != dtype.itemsize)) {
    return Status::InvalidArgument(what + " holds a tensor whose last dimension is not its " +
                                   std::to_string(dtype.itemsize) + "-byte items");
  }
  return Status::Ok();
}

void WriteNumpyArrayValue(PickleWriter& p, std::string_view module, const Value& fields,
                          const Tensor& data) {
  const NumpyDType dtype = *NumpyDTypeFromName(fields.Find(std::string_view("dtype"))->as_string());
  Shape shape = data.shape();
  if (dtype.AsBytes()) shape.pop_back();
  WriteNumpyArray(p, module, dtype, shape, data.host_bytes());
}

namespace {

// The bytes of a numpy.scalar value's element and its dtype; nullopt when
// the value is not one rckpt.save or the importer writes.
std::optional<std::pair<NumpyDType, std::string>> ScalarBytes(const Value& fields) {
  if (!fields.is_map() || fields.entries().size() != 2) return std::nullopt;
  const Value* name = fields.Find(std::string_view("dtype"));
  const Value* v = fields.Find(std::string_view("value"));
  if (name == nullptr || v == nullptr || name->kind() != ValueKind::kString) return std::nullopt;
  NumpyDType d;
  std::string b;
  if (name->as_string() == "str" || name->as_string() == "bytes") {
    const bool text = name->as_string() == "str";
    if (v->kind() != (text ? ValueKind::kString : ValueKind::kBytes)) return std::nullopt;
    if (text) {
      auto ucs4 = Utf8ToUcs4(v->as_string());
      if (!ucs4) return std::nullopt;
      b = std::move(*ucs4);
    } else {
      b = v->as_string();
    }
    d.kind = text ? 'U' : 'S';
    d.itemsize = static_cast<uint32_t>(b.size());
    return std::make_pair(d, b);
  }
  auto parsed = NumpyDTypeFromName(name->as_string());
  if (!parsed) return std::nullopt;
  d = *parsed;
  auto put_double = [&](double x, uint32_t size) {
    if (size == 2) {
      AppendLE(&b, DoubleToHalf(x), 2);
    } else if (size == 4) {
      const float f = static_cast<float>(x);
      b.append(reinterpret_cast<const char*>(&f), 4);
    } else {
      b.append(reinterpret_cast<const char*>(&x), 8);
    }
  };
  const bool big = (d.kind == 'f' && d.itemsize > 8) || (d.kind == 'c' && d.itemsize > 16);
  if (big) {
    if (v->kind() != ValueKind::kBytes || v->as_string().size() != d.itemsize) return std::nullopt;
    return std::make_pair(d, v->as_string());
  }
  switch (d.kind) {
    case 'b':
      if (v->kind() != ValueKind::kBool) return std::nullopt;
      b.push_back(v->as_bool() ? 1 : 0);
      break;
    case 'i':
    case 'u':
    case 'm':
    case 'M': {
      uint64_t bits;
      if (v->kind() == ValueKind::kInt) {
        const int64_t x = v->as_int();
        if (d.kind == 'u' && x < 0) return std::nullopt;
        const int width = 8 * static_cast<int>(d.itemsize);
        if (width < 64) {
          const int64_t lo = d.kind == 'u' ? 0 : -(int64_t{1} << (width - 1));
          const int64_t hi = d.kind == 'u' ? (int64_t{1} << width) - 1
                                           : (int64_t{1} << (width - 1)) - 1;
          if (x < lo || x > hi) return std::nullopt;
        }
        bits = static_cast<uint64_t>(x);
      } else if (v->kind() == ValueKind::kBigInt && d.kind == 'u' && d.itemsize == 8) {
        std::string le = v->as_string();
        if (le.size() != 9 || le.back() != 0) return std::nullopt;
        bits = LoadLE(reinterpret_cast<const std::byte*>(le.data()), 8);
      } else {
        return std::nullopt;
      }
      AppendLE(&b, bits, static_cast<int>(d.itemsize));
      break;
    }
    case 'f':
      if (v->kind() != ValueKind::kFloat) return std::nullopt;
      put_double(v->as_float(), d.itemsize);
      break;
    case 'c':
      if (v->kind() != ValueKind::kTuple || v->items().size() != 2 ||
          v->items()[0].kind() != ValueKind::kFloat || v->items()[1].kind() != ValueKind::kFloat) {
        return std::nullopt;
      }
      put_double(v->items()[0].as_float(), d.itemsize / 2);
      put_double(v->items()[1].as_float(), d.itemsize / 2);
      break;
    default: return std::nullopt;
  }
  return std::make_pair(d, b);
}

}  // namespace

bool IsNumpyScalarValue(const Value& fields) { return ScalarBytes(fields).has_value(); }

void WriteNumpyScalarValue(PickleWriter& p, std::string_view module, const Value& fields) {
  auto s = ScalarBytes(fields);
  if (!s) {  // callers check IsNumpyScalarValue first
    p.None();
    return;
  }
  p.Global(std::string(module) + ".multiarray", "scalar");
  WriteDType(p, module, s->first);
  p.Bytes(s->second);
  p.Op(0x86);
  p.Op('R');
}

Status WriteNumpyRng(PickleWriter& p, std::string_view module,
                     std::span<const std::byte> record) {
  Status valid = ValidateNumpyRng(record);
  if (!valid.ok()) return Status::InvalidArgument("export: " + valid.message());
  const NumpyRngLayout& layout = *FindNumpyRngLayout(record);
  auto field = [&](const NumpyRngField& f) {
    const std::byte* at = record.data() + f.offset;
    const uint32_t size = FieldBytes(f.type);
    if (f.count > 1) {
      NumpyDType d{'u', size, ""};
      WriteNumpyArray(p, module, d, std::vector<int64_t>{f.count},
                      record.subspan(f.offset, size * f.count));
    } else if (f.type == NumpyFieldType::kF64) {
      double x;
      std::memcpy(&x, at, 8);
      p.Float(x);
    } else if (f.type == NumpyFieldType::kU32) {
      p.Int(static_cast<int64_t>(LoadLE(at, 4)));
    } else {
      const uint64_t lo = LoadLE(at, 8);
      const uint64_t hi = f.type == NumpyFieldType::kU128 ? LoadLE(at + 8, 8) : 0;
      if (hi == 0 && lo <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        p.Int(static_cast<int64_t>(lo));
      } else {
        p.BigInt(UnsignedBigInt(lo, hi));
      }
    }
  };
  if (layout.legacy) {
    p.Mark();
    p.Str(layout.bit_generator);
    for (const NumpyRngField& f : layout.fields) field(f);
    p.Op('t');
    return Status::Ok();
  }
  // {'bit_generator': name, 'state': {...}, ...}, in NumPy's key order.
  p.Op('}');
  p.Mark();
  p.Str("bit_generator");
  p.Str(layout.bit_generator);
  const auto& fields = layout.fields;
  for (size_t i = 0; i < fields.size();) {
    const std::string_view path = fields[i].path;
    const size_t dot = path.find('.');
    p.Str(path.substr(0, dot));
    if (dot == std::string_view::npos) {
      field(fields[i++]);
      continue;
    }
    const std::string_view head = path.substr(0, dot + 1);
    p.Op('}');
    p.Mark();
    for (; i < fields.size() && fields[i].path.substr(0, head.size()) == head; ++i) {
      p.Str(fields[i].path.substr(head.size()));
      field(fields[i]);
    }
    p.Op('u');
  }
  p.Op('u');
  return Status::Ok();
}

}  // namespace rckpt::convert
