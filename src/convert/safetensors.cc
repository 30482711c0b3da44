// safetensors import and export.
#include <algorithm>
#include <cstring>
#include <set>

#include "io/atomic_write.h"
#include "convert/bytes.h"
#include "convert/import_common.h"
#include "convert/json.h"
#include "util/json_writer.h"
#include "util/utf8.h"
#include "convert/tree_json.h"
#include "convert/zip.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"

namespace rckpt {
namespace convert {
namespace {

constexpr uint64_t kMaxHeader = 100'000'000;
constexpr const char* kFormatKey = "rckpt.format";
constexpr const char* kTreeKey = "rckpt.tree";
constexpr const char* kTensorsKey = "rckpt.tensors";
constexpr const char* kSectionsKey = "rckpt.sections";
constexpr const char* kRngKey = "rckpt.rng";

struct StDType {
  const char* name;
  std::optional<DType> dtype;
};
const StDType kStDTypes[] = {
    {"F64", DType::kF64},  {"F32", DType::kF32},  {"F16", DType::kF16},
    {"BF16", DType::kBF16}, {"F8_E4M3", DType::kF8E4M3FN}, {"F8_E5M2", DType::kF8E5M2},
    {"I8", DType::kI8},    {"I16", DType::kI16},  {"I32", DType::kI32},
    {"I64", DType::kI64},  {"U8", DType::kU8},    {"U16", DType::kU16},
    {"U32", DType::kU32},  {"U64", DType::kU64},  {"BOOL", DType::kBool},
    {"C64", DType::kC64},
    // Valid safetensors dtypes that rckpt cannot hold.
    {"F4", std::nullopt},  {"F6_E2M3", std::nullopt}, {"F6_E3M2", std::nullopt},
    {"F8_E8M0", std::nullopt}, {"F8_E4M3FNUZ", std::nullopt}, {"F8_E5M2FNUZ", std::nullopt},
};

// The keys ExportSafetensors writes for rckpt's layout; a checkpoint's
// own metadata may use any other key.
bool IsLayoutKey(std::string_view k) {
  return k == kFormatKey || k == kTreeKey || k == kTensorsKey || k == kSectionsKey ||
         k == kRngKey;
}

const char* StName(DType d) {
  for (const auto& s : kStDTypes) {
    if (s.dtype == d) return s.name;
  }
  return nullptr;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

std::vector<std::string> SplitName(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

Result<Json> ParseMetaJson(const std::map<std::string, std::string>& meta, const char* key) {
  auto it = meta.find(key);
  if (it == meta.end()) return Status::Corruption(std::string("safetensors: missing ") + key);
  auto j = ParseJson(it->second, 8192);
  if (!j.ok()) return j.status().WithContext(std::string("safetensors: __metadata__ ") + key);
  return j;
}

Status ImportRckptLayout(const std::map<std::string, std::string>& meta,
                         std::map<std::string, Tensor>& tensors, Checkpoint* ck) {
  auto bad = [](const std::string& what) {
    return Status::Corruption("safetensors: rckpt metadata: " + what);
  };
  RCKPT_ASSIGN_OR_RETURN(Json sections, ParseMetaJson(meta, kSectionsKey));
  RCKPT_ASSIGN_OR_RETURN(Json tlist, ParseMetaJson(meta, kTensorsKey));
  RCKPT_ASSIGN_OR_RETURN(Json rlist, ParseMetaJson(meta, kRngKey));
  if (!sections.is_array() || !tlist.is_array() || !rlist.is_array()) {
    return bad("sections, tensors and rng must be arrays");
  }
  for (const Json& s : sections.items) {
    Role role;
    if (!s.is_array() || s.items.size() != 2 || !s.items[0].is_string() ||
        !s.items[1].is_string() || !ParseRole(s.items[1].text, &role)) {
      return bad("malformed section entry");
    }
    RCKPT_RETURN_IF_ERROR(ck->AddSection(s.items[0].text, role));
  }
  std::set<std::string> used;
  for (const Json& t : tlist.items) {
    Role role;
    if (!t.is_array() || t.items.size() != 4 || !t.items[0].is_string() ||
        !t.items[1].is_string() || !t.items[2].is_string() || !t.items[3].is_string() ||
        !ParseRole(t.items[2].text, &role)) {
      return bad("malformed tensor entry");
    }
    const std::string& name = t.items[0].text;
    auto it = tensors.find(name);
    if (it == tensors.end() || !used.insert(name).second) {
      return bad("tensor '" + Printable(name) + "' is missing or listed twice");
    }
    RCKPT_ASSIGN_OR_RETURN(Device origin, ParseRecordedDevice(t.items[3].text));
    RCKPT_RETURN_IF_ERROR(ck->AddTensor(t.items[1].text, name, it->second, role));
    if (origin != Device::Cpu()) ck->mutable_tensors().back().origin = origin;
  }
  for (const Json& r : rlist.items) {
    RngKind kind;
    if (!r.is_array() || r.items.size() != 3 || !r.items[0].is_string() ||
        !r.items[1].is_string() || !r.items[2].is_string() ||
        !ParseRngKind(r.items[1].text, &kind)) {
      return bad("malformed rng entry");
    }
    const std::string& name = r.items[0].text;
    auto it = tensors.find(name);
    if (it == tensors.end() || !used.insert(name).second) {
      return bad("RNG record '" + Printable(name) + "' is missing or listed twice");
    }
    if (it->second.dtype() != DType::kU8 || it->second.shape().size() != 1) {
      return bad("RNG record '" + Printable(name) + "' is not a U8 1-D tensor");
    }
    RCKPT_ASSIGN_OR_RETURN(Device origin, ParseRecordedDevice(r.items[2].text));
    RCKPT_RETURN_IF_ERROR(ck->AddRng(name, kind, it->second.host_bytes(), origin));
  }
  if (used.size() != tensors.size()) {
    for (const auto& [name, t] : tensors) {
      if (!used.count(name)) return bad("tensor '" + Printable(name) + "' is not described");
    }
  }
  if (meta.count(kTreeKey)) {
    RCKPT_ASSIGN_OR_RETURN(Json tree, ParseMetaJson(meta, kTreeKey));
    auto v = TreeFromJson(tree);
    if (!v.ok()) return v.status().WithContext("safetensors: rckpt.tree");
    ck->Tree() = std::move(v).value();
  }
  // Every other key is the checkpoint's metadata, "rckpt." keys that
  // describe how it was written (rckpt.world_size, rckpt.dcp.*) included.
  for (const auto& [k, v] : meta) {
    if (!IsLayoutKey(k)) ck->Metadata()[k] = v;
  }
  return Status::Ok();
}

// The header of a safetensors file, validated: its metadata and its
// tensors' entries, which tile the data region after it.
struct Header {
  uint64_t size = 0;  // of the JSON, after the 8-byte size
  std::map<std::string, std::string> meta;
  std::vector<Entry> entries;
  std::vector<size_t> order;  // entries by data offset
};

// One tensor's entry of the header: dtype, shape and a data extent that
// holds exactly its bytes.
Result<Entry> ParseEntry(const std::string& name, const Json& e) {
  auto bad = [&name](const std::string& what) {
    return Status::Corruption("safetensors: tensor '" + Printable(name) + "': " + what);
  };
  if (name.empty()) {
    // Any JSON string is a key of the format, but every tensor of a
    // checkpoint has a name.
    return Status::Unsupported(
        "safetensors: a tensor has an empty name (\"\" in the header), which rckpt cannot hold");
  }
  const Json* dt = e.is_object() ? e.Find("dtype") : nullptr;
  const Json* shape = e.is_object() ? e.Find("shape") : nullptr;
  const Json* offs = e.is_object() ? e.Find("data_offsets") : nullptr;
  if (!dt || !dt->is_string() || !shape || !shape->is_array() || !offs ||
      !offs->is_array() || offs->items.size() != 2) {
    return bad("needs dtype (string), shape (array) and data_offsets ([begin, end])");
  }
  const StDType* st = nullptr;
  for (const auto& s : kStDTypes) {
    if (dt->text == s.name) st = &s;
  }
  if (st == nullptr) return bad("unknown dtype '" + Printable(dt->text) + "'");
  if (!st->dtype) {
    return Status::Unsupported("safetensors: tensor '" + Printable(name) + "' has dtype " +
                               st->name + ", which rckpt cannot hold");
  }
  Entry en{name, *st->dtype, {}, 0, 0};
  for (const Json& d : shape->items) {
    auto v = d.AsUint();
    if (!v || *v > static_cast<uint64_t>(INT64_MAX)) return bad("shape entry is not a u64");
    en.shape.push_back(static_cast<int64_t>(*v));
  }
  auto b = offs->items[0].AsUint(), en_end = offs->items[1].AsUint();
  if (!b || !en_end) return bad("data_offsets are not u64 integers");
  en.begin = *b;
  en.end = *en_end;
  uint64_t nbytes = DTypeSize(en.dtype);
  for (int64_t d : en.shape) {
    if (!MulOk(nbytes, static_cast<uint64_t>(d), &nbytes)) return bad("size overflows");
  }
  if (en.end < en.begin || en.end - en.begin != nbytes) {
    return bad("data_offsets [" + std::to_string(en.begin) + ", " + std::to_string(en.end) +
               ") hold " + std::to_string(en.end - en.begin) + " bytes, dtype " + st->name +
               " and shape need " + std::to_string(nbytes));
  }
  return en;
}

Result<Header> ReadHeader(const RandomAccessFile& f) {
  uint64_t size = f.Size();
  if (size < 8) {
    return Status::Corruption("safetensors: file of " + std::to_string(size) +
                              " bytes is shorter than the 8-byte header size");
  }
  std::byte nbuf[8];
  RCKPT_RETURN_IF_ERROR(f.ReadAt(0, nbuf));
  uint64_t n = Load64(nbuf);
  if (n > kMaxHeader) {
    return Status::Corruption("safetensors: header size " + std::to_string(n) +
                              " exceeds the 100000000-byte limit (is this a Git LFS pointer "
                              "or a truncated download?)");
  }
  if (n + 8 > size) {
    return Status::Corruption("safetensors: header size " + std::to_string(n) +
                              " passes the end of the file (" + std::to_string(size) +
                              " bytes)");
  }
  Header h;
  h.size = n;
  std::string header(n, '\0');
  RCKPT_RETURN_IF_ERROR(f.ReadAt(8, {reinterpret_cast<std::byte*>(header.data()), n}));
  auto parsed = ParseJson(header, 64);
  if (!parsed.ok()) return parsed.status().WithContext("safetensors: header");
  const Json& root = *parsed;
  if (!root.is_object()) return Status::Corruption("safetensors: header is not a JSON object");
  for (const auto& [name, e] : root.members) {
    if (name == "__metadata__") {
      if (!e.is_object()) return Status::Corruption("safetensors: __metadata__ is not an object");
      for (const auto& [k, v] : e.members) {
        if (!v.is_string()) {
          return Status::Corruption("safetensors: __metadata__ value of '" + Printable(k) +
                                    "' is not a string");
        }
        h.meta[k] = v.text;
      }
      continue;
    }
    RCKPT_ASSIGN_OR_RETURN(Entry en, ParseEntry(name, e));
    h.entries.push_back(std::move(en));
  }
  const std::vector<Entry>& entries = h.entries;
  h.order.resize(entries.size());
  for (size_t i = 0; i < h.order.size(); ++i) h.order[i] = i;
  std::stable_sort(h.order.begin(), h.order.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].begin, entries[a].end) < std::tie(entries[b].begin, entries[b].end);
  });
  uint64_t cursor = 0;
  for (size_t i : h.order) {
    if (entries[i].begin != cursor) {
      return Status::Corruption("safetensors: tensor '" + Printable(entries[i].name) +
                                "' starts at " + std::to_string(entries[i].begin) +
                                ", expected " + std::to_string(cursor) +
                                (entries[i].begin > cursor ? " (a gap)" : " (an overlap)"));
    }
    cursor = entries[i].end;
  }
  if (cursor + 8 + n != size) {
    return Status::Corruption("safetensors: data ends at " + std::to_string(cursor + 8 + n) +
                              " but the file has " + std::to_string(size) +
                              " bytes (trailing or missing bytes)");
  }
  return h;
}

// Every tensor of `h`. Tensors point into the file's mapping where their
// bytes are aligned for their dtype (the reference writer pads the header to
// a multiple of 8); otherwise, or where the file cannot be mapped, each is
// read into memory of its own.
Result<std::map<std::string, Tensor>> ReadTensors(const RandomAccessFile& f, const Header& h,
                                                  const ImportOptions& options) {
  std::shared_ptr<std::byte> map;
  if (options.map_file) {
    auto mapped = f.MapPrivate();
    if (mapped.ok()) map = std::move(mapped).value();
  }
  std::map<std::string, Tensor> tensors;
  for (size_t i : h.order) {
    const Entry& e = h.entries[i];
    const uint64_t at = 8 + h.size + e.begin;
    if (map && at % DTypeSize(e.dtype) == 0) {
      tensors.emplace(e.name, Tensor::Adopt(e.dtype, e.shape, Device::Cpu(), map, map.get() + at));
      continue;
    }
    RCKPT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(e.dtype, e.shape));
    if (t.nbytes() > 0) RCKPT_RETURN_IF_ERROR(f.ReadAt(at, t.mutable_host_bytes()));
    tensors.emplace(e.name, std::move(t));
  }
  return tensors;
}

// A file rckpt wrote (rckpt.format): the checkpoint its layout describes.
Status ImportWithLayout(const std::map<std::string, std::string>& meta,
                        std::map<std::string, Tensor>& tensors, Checkpoint& ck) {
  if (meta.at(kFormatKey) != "1") {
    return Status::Unsupported("safetensors: rckpt.format '" + Printable(meta.at(kFormatKey)) +
                               "' is newer than this reader (1)");
  }
  // The layout is file content: a value the checkpoint refuses (a bad
  // device, a duplicate or empty name) is a damaged file, not a bad argument.
  // The message quotes file content, already one line (a Status writes
  // control bytes as \xNN).
  const Status layout = ImportRckptLayout(meta, tensors, &ck);
  if (layout.code() == StatusCode::kInvalidArgument) {
    return Status::Corruption("safetensors: rckpt metadata: " + layout.message());
  }
  return layout;
}

// A plain file: every tensor in one tree of its names, in the "model"
// section unless an override says otherwise; RNG states found by key.
Status ImportPlain(const Header& h, std::map<std::string, Tensor>& tensors,
                   const ImportOptions& options, Checkpoint& ck,
                   std::vector<std::string>* warnings) {
  const std::vector<Entry>& entries = h.entries;
  const std::vector<size_t>& order = h.order;
  std::vector<Value::Entry> tree;
  for (size_t i : order) {
    const Entry& e = entries[i];
    Tensor& t = tensors[e.name];
    std::vector<std::string> path = SplitName(e.name);
    std::optional<RngGuess> rng;
    if (t.dtype() == DType::kU8 && t.shape().size() == 1) {
      rng = DetectRng(path, t.nbytes(), options, warnings);
    }
    if (rng && ck.AddRng(e.name, rng->kind, t.host_bytes(), rng->origin).ok()) {
      tree.emplace_back(Value(e.name), Value::RngRef(e.name));
      continue;
    }
    // A flat name is its own top-level key; overrides match the full name
    // or its first dotted component.
    std::string section = "model";
    if (auto it = options.section_overrides.find(e.name); it != options.section_overrides.end()) {
      section = it->second;
    } else if (auto it2 = options.section_overrides.find(path[0]);
               it2 != options.section_overrides.end()) {
      section = it2->second;
    }
    RCKPT_RETURN_IF_ERROR(ck.AddTensor(section, e.name, std::move(t)));
    tree.emplace_back(Value(e.name), Value::TensorRef(e.name));
  }
  ck.Tree() = Value::Map(std::move(tree));
  ck.Metadata() = h.meta;
  return Status::Ok();
}

Result<Checkpoint> Import(const RandomAccessFile& f, const ImportOptions& options,
                          ImportReport* report) {
  RCKPT_ASSIGN_OR_RETURN(Header h, ReadHeader(f));
  RCKPT_ASSIGN_OR_RETURN(auto tensors, ReadTensors(f, h, options));
  Checkpoint ck;
  std::vector<std::string> warnings;
  const bool written_by_rckpt = h.meta.count(kFormatKey) > 0;
  if (written_by_rckpt) {
    RCKPT_RETURN_IF_ERROR(ImportWithLayout(h.meta, tensors, ck));
  } else {
    RCKPT_RETURN_IF_ERROR(ImportPlain(h, tensors, options, ck, &warnings));
  }
  if (report != nullptr) {
    report->format = "safetensors";
    report->warnings.insert(report->warnings.end(), warnings.begin(), warnings.end());
    if (!written_by_rckpt) {
      // A plain file records tensors and string metadata only.
      report->recorded.sections = false;
      report->recorded.origins = false;
      report->recorded.rng_kinds = false;
      report->recorded.tree = false;
      report->recorded.key_order = false;
    }
  }
  return ck;
}

// Whether importing the exported file without any rckpt.* key gives `ck`
// back: one section "model" of role model, every tensor in it with that role
// and stored on the host, no RNG record and no tensor a plain import would
// take for one, and the flat tree of a plain import (name -> tensor, in file
// order). Such a file is written with the user's metadata alone, so a plain
// safetensors file survives safetensors -> rckpt -> safetensors unchanged.
bool IsPlainModelFile(const Checkpoint& ck) {
  if (!ck.rng().empty()) return false;
  if (ck.tensors().empty()) return ck.sections().empty() && ck.Tree().is_null();
  if (ck.sections().size() != 1 || ck.sections()[0].name != "model" ||
      ck.sections()[0].role != Role::kModel) {
    return false;
  }
  std::vector<Value::Entry> flat;
  std::vector<std::string> ignored;
  for (const TensorEntry& t : ck.tensors()) {
    if (t.section != "model" || t.role != Role::kModel || !t.Origin().is_cpu()) return false;
    if (t.tensor.dtype() == DType::kU8 && t.tensor.shape().size() == 1 &&
        DetectRng(SplitName(t.name), t.tensor.nbytes(), ImportOptions{}, &ignored)) {
      return false;
    }
    flat.emplace_back(Value(t.name), Value::TensorRef(t.name));
  }
  return ck.Tree() == Value::Map(std::move(flat));
}

// What of `ck` a safetensors reader other than rckpt does not see (it is in
// the rckpt.* keys of __metadata__), as one line; empty when nothing.
std::string OnlyRckptReads(const Checkpoint& ck) {
  std::vector<std::string> parts;
  // A flat map of name -> that tensor or RNG record is what any reader has.
  bool flat = ck.Tree().is_null() || ck.Tree().is_map();
  for (const auto& [k, v] : ck.Tree().entries()) {
    flat = flat && (v.kind() == ValueKind::kTensorRef || v.kind() == ValueKind::kRngRef) &&
           k == Value(v.as_string());
  }
  if (!flat) parts.push_back("the state tree");
  if (!ck.rng().empty()) {
    parts.push_back(std::to_string(ck.rng().size()) + " RNG record" +
                    (ck.rng().size() == 1 ? "" : "s") + " (other readers see U8 tensors)");
  }
  bool sections = false, origins = false;
  for (const TensorEntry& t : ck.tensors()) {
    if (t.section != "model" || t.role != Role::kModel) sections = true;
    if (!t.Origin().is_cpu()) origins = true;
  }
  for (const RngRecord& r : ck.rng()) origins = origins || !r.origin.is_cpu();
  if (sections) parts.push_back("sections and roles");
  if (origins) parts.push_back("origin devices");
  if (parts.empty()) return "";
  std::string out = "kept in __metadata__ (rckpt.* keys), which rckpt reads back and other "
                    "safetensors readers ignore: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : "; ") + parts[i];
  return out;
}

struct Out {
  std::string name;
  const char* dtype;
  Shape shape;
  std::span<const std::byte> bytes;
};

}  // namespace
}  // namespace convert

Result<Checkpoint> ImportSafetensorsFromBytes(std::span<const std::byte> bytes,
                                              const ImportOptions& options,
                                              ImportReport* report) {
  convert::SpanFile f(bytes);
  return convert::Import(f, options, report);
}

Result<Checkpoint> ImportSafetensors(const std::string& path, const ImportOptions& options,
                                     ImportReport* report) {
  FileSystem& fs = options.fs ? *options.fs : DefaultFileSystem();
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.OpenForRead(path));
  auto r = convert::Import(*f, options, report);
  if (!r.ok()) return r.status().WithContext("'" + path + "'");
  return r;
}

Status ExportSafetensors(const Checkpoint& ck, const std::string& path,
                         const ExportOptions& options) {
  std::vector<convert::Out> outs;
  std::string tensors_json = "[", rng_json = "[", sections_json = "[";
  for (const TensorEntry& t : ck.tensors()) {
    const char* st = convert::StName(t.tensor.dtype());
    if (st == nullptr) {
      return Status::Unsupported("export: tensor '" + t.name + "' has dtype " +
                                 std::string(DTypeName(t.tensor.dtype())) +
                                 ", which safetensors cannot hold");
    }
    if (!t.tensor.device().is_cpu()) {
      return Status::InvalidArgument("export: tensor '" + t.name + "' lives on " +
                                     t.tensor.device().ToString() +
                                     "; load the checkpoint to host memory first");
    }
    if (t.name == "__metadata__" || !IsValidUtf8(t.name)) {
      return Status::InvalidArgument("export: tensor name '" + convert::Printable(t.name) +
                                     "' cannot be a safetensors name");
    }
    outs.push_back({t.name, st, t.tensor.shape(), t.tensor.host_bytes()});
    if (tensors_json.size() > 1) tensors_json += ',';
    tensors_json += '[';
    AppendJsonString(tensors_json, t.name);
    tensors_json += ',';
    AppendJsonString(tensors_json, t.section);
    tensors_json += ',';
    AppendJsonString(tensors_json, RoleName(t.role));
    tensors_json += ',';
    AppendJsonString(tensors_json, t.Origin().ToString());
    tensors_json += ']';
  }
  for (const RngRecord& r : ck.rng()) {
    if (r.name == "__metadata__" || !IsValidUtf8(r.name)) {
      return Status::InvalidArgument("export: RNG name '" + convert::Printable(r.name) +
                                     "' cannot be a safetensors name");
    }
    outs.push_back({r.name, "U8", {static_cast<int64_t>(r.bytes.size())}, r.bytes});
    if (rng_json.size() > 1) rng_json += ',';
    rng_json += '[';
    AppendJsonString(rng_json, r.name);
    rng_json += ',';
    AppendJsonString(rng_json, RngKindName(r.kind));
    rng_json += ',';
    AppendJsonString(rng_json, r.origin.ToString());
    rng_json += ']';
  }
  for (const SectionInfo& s : ck.sections()) {
    if (sections_json.size() > 1) sections_json += ',';
    sections_json += '[';
    AppendJsonString(sections_json, s.name);
    sections_json += ',';
    AppendJsonString(sections_json, RoleName(s.role));
    sections_json += ']';
  }
  tensors_json += ']';
  rng_json += ']';
  sections_json += ']';
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : ck.Metadata()) {
    if (convert::IsLayoutKey(k)) {
      return Status::InvalidArgument("export: metadata key '" + k +
                                     "' is reserved: safetensors export writes it itself "
                                     "(rckpt.format, rckpt.sections, rckpt.tensors, rckpt.rng, "
                                     "rckpt.tree)");
    }
    if (!IsValidUtf8(k) || !IsValidUtf8(v)) {
      return Status::InvalidArgument("export: user metadata '" + convert::Printable(k) +
                                     "' is not valid UTF-8");
    }
    meta[k] = v;
  }
  // What a plain import derives by itself is not written (IsPlainModelFile).
  const bool plain = convert::IsPlainModelFile(ck);
  if (!plain) {
    meta[convert::kFormatKey] = "1";
    meta[convert::kTensorsKey] = tensors_json;
    meta[convert::kRngKey] = rng_json;
    meta[convert::kSectionsKey] = sections_json;
    if (!ck.Tree().is_null()) {
      std::string tree;
      convert::AppendTreeJson(&tree, ck.Tree());
      meta[convert::kTreeKey] = std::move(tree);
    }
  }
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [k, v] : meta) {
    if (!first) header += ',';
    first = false;
    AppendJsonString(header, k);
    header += ':';
    AppendJsonString(header, v);
  }
  header += '}';
  uint64_t offset = 0;
  for (const convert::Out& o : outs) {
    header += ',';
    AppendJsonString(header, o.name);
    header += ":{\"dtype\":\"";
    header += o.dtype;
    header += "\",\"shape\":[";
    for (size_t i = 0; i < o.shape.size(); ++i) {
      if (i) header += ',';
      header += std::to_string(o.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + o.bytes.size()) + "]}";
    offset += o.bytes.size();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > convert::kMaxHeader) {
    return Status::InvalidArgument("export: safetensors header of " +
                                   std::to_string(header.size()) +
                                   " bytes exceeds the 100000000-byte limit");
  }
  FileSystem& fs = options.fs ? *options.fs : DefaultFileSystem();
  RCKPT_RETURN_IF_ERROR(WriteFileAtomically(fs, path, [&](WritableFile& f) -> Status {
    std::string n;
    convert::AppendLE(&n, header.size(), 8);
    RCKPT_RETURN_IF_ERROR(f.Append(convert::AsBytes(n)));
    RCKPT_RETURN_IF_ERROR(f.Append(convert::AsBytes(header)));
    for (const convert::Out& o : outs) RCKPT_RETURN_IF_ERROR(f.Append(o.bytes));
    return Status::Ok();
  }));
  if (options.report != nullptr && !plain) {
    std::string note = convert::OnlyRckptReads(ck);
    if (!note.empty()) options.report->notes.push_back(note);
  }
  return Status::Ok();
}

}  // namespace rckpt
