#include "folder_binding.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "call_args.h"
#include "convert/bundle.h"
#include "convert/json.h"
#include "errors.h"
#include "from_checkpoint.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/io.h"
#include "to_checkpoint.h"
#include "util/json_writer.h"

namespace rckpt::python {
namespace {

namespace fs = std::filesystem;
using namespace nb::literals;

constexpr char kManifestKey[] = "rckpt.folder";
constexpr char kFilesKey[] = "files";
constexpr char kFilesSection[] = "files";

struct Entry {
  std::string path;  // relative to the folder
  std::string how;
  std::string key;
  std::string section;
  std::string source;        // pytorch, safetensors, bytes
  std::optional<Value> tree;  // tree
  std::string reason;        // why it went in otherwise than asked
};

std::string FileName(const std::string& rel) { return std::string(kFilesKey) + "." + rel; }

// A file's bytes as a uint8 tensor over its mapping (read where it cannot
// be mapped).
Result<Tensor> FileBytes(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, PosixFileSystem().OpenForRead(path));
  const uint64_t size = f->Size();
  const Shape shape{static_cast<int64_t>(size)};
  if (size > 0) {
    auto mapped = f->MapPrivate();
    if (mapped.ok()) return Tensor::Adopt(DType::kU8, shape, Device::Cpu(), *mapped, mapped->get());
  }
  RCKPT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(DType::kU8, shape));
  if (size > 0) RCKPT_RETURN_IF_ERROR(f->ReadAt(0, t.mutable_host_bytes()));
  return t;
}

Status AddEntry(Entry& e, Checkpoint* bundle, std::vector<Value::Entry>* files) {
  if (e.how == "pytorch" || e.how == "safetensors") {
    ImportReport report;
    Result<Checkpoint> ck = e.how == "pytorch" ? ImportPyTorch(e.source, {}, &report)
                                               : ImportSafetensors(e.source, {}, &report);
    if (ck.ok() && report.inert_classes.empty()) {
      return convert::AddBundlePart(bundle, {e.key, e.section, *std::move(ck)});
    }
    // Kept as it is: what rckpt cannot write back the same way.
    if (!ck.ok()) {
      e.reason = ck.status().message();
    } else {
      e.reason = "holds objects a PyTorch export cannot write back (";
      for (size_t i = 0; i < report.inert_classes.size(); ++i) {
        e.reason += (i ? ", " : "") + report.inert_classes[i];
      }
      e.reason += ")";
    }
    e.how = "bytes";
  }
  if (e.how == "tree") {
    Checkpoint part;
    part.Tree() = std::move(*e.tree);
    return convert::AddBundlePart(bundle, {e.key, e.section, std::move(part)});
  }
  RCKPT_ASSIGN_OR_RETURN(Tensor t, FileBytes(e.source));
  RCKPT_RETURN_IF_ERROR(bundle->AddTensor(kFilesSection, FileName(e.path), std::move(t)));
  files->emplace_back(Value(e.path), Value::TensorRef(FileName(e.path)));
  return Status::Ok();
}

std::string Manifest(const std::vector<Entry>& entries) {
  JsonWriter w;
  w.BeginObject().Key("version").Int(1).Key("files").BeginArray();
  for (const Entry& e : entries) {
    w.BeginArray().String(e.path).String(e.how).String(e.how == "bytes" ? kFilesKey : e.key);
    w.EndArray();
  }
  w.EndArray().EndObject();
  return w.str();
}

nb::dict PackFolder(const std::string& dst, nb::list items, const SaveOptions& options) {
  std::vector<Entry> entries;
  for (nb::handle item : items) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    Entry e{nb::cast<std::string>(t[0]), nb::cast<std::string>(t[1]),
            nb::cast<std::string>(t[2]), nb::cast<std::string>(t[3]), "", std::nullopt, ""};
    if (e.how == "tree") {
      e.tree = PlainTree(t[4], e.path);
    } else if (e.how == "pytorch" || e.how == "safetensors" || e.how == "bytes") {
      e.source = nb::cast<std::string>(t[4]);
    } else {
      throw nb::value_error(("pack_folder: '" + e.path + "': unknown how '" + e.how + "'").c_str());
    }
    entries.push_back(std::move(e));
  }
  Progress p{nb::none()};
  SaveOptions o = SaveOptionsOf(options, nullptr, &p);
  Checkpoint bundle;
  Status s;
  {
    nb::gil_scoped_release release;
    s = bundle.AddSection(kFilesSection, Role::kHost);
    std::vector<Value::Entry> files;
    for (Entry& e : entries) {
      if (!s.ok()) break;
      s = AddEntry(e, &bundle, &files).WithContext("'" + e.path + "'");
    }
    if (s.ok()) {
      if (bundle.Tree().is_null()) bundle.Tree() = Value::Map();
      if (bundle.Tree().FindKey(Value(kFilesKey)) != nullptr) {
        s = Status::InvalidArgument("pack_folder: a converted file has the key 'files', which "
                                    "holds the files carried as bytes");
      }
      bundle.Tree().entries().emplace_back(Value(kFilesKey), Value::Map(std::move(files)));
      bundle.Metadata()[kManifestKey] = Manifest(entries);
    }
    if (s.ok()) s = Save(dst, bundle, o);
  }
  ThrowIfError(s);
  nb::list files;
  for (const Entry& e : entries) files.append(nb::make_tuple(e.path, e.how, e.reason));
  nb::dict out;
  out["files"] = files;
  out["tensors"] = bundle.tensors().size();
  out["bytes"] = bundle.TensorBytes();
  return out;
}

// The manifest's entries; Corruption naming what is wrong.
Result<std::vector<Entry>> ReadManifest(const Checkpoint& bundle, const std::string& src) {
  auto it = bundle.Metadata().find(kManifestKey);
  if (it == bundle.Metadata().end()) {
    return Status::InvalidArgument("'" + src + "' holds no folder (no metadata '" +
                                   std::string(kManifestKey) + "'; rckpt.hf.pack writes one)");
  }
  auto bad = [&](const std::string& why) {
    return Status::Corruption("'" + src + "': metadata '" + std::string(kManifestKey) + "' " + why);
  };
  auto json = convert::ParseJson(it->second, 4);
  if (!json.ok()) return bad(json.status().message());
  const convert::Json* version = json->Find("version");
  const convert::Json* files = json->Find("files");
  if (version == nullptr || version->AsInt() != 1) return bad("is not version 1");
  if (files == nullptr || !files->is_array()) return bad("has no list of files");
  std::vector<Entry> out;
  for (const convert::Json& f : files->items) {
    if (!f.is_array() || f.items.size() != 3 ||
        !std::all_of(f.items.begin(), f.items.end(), [](const auto& x) { return x.is_string(); })) {
      return bad("holds an entry that is not [path, how, key]");
    }
    Entry e{f.items[0].text, f.items[1].text, f.items[2].text, "", "", std::nullopt, ""};
    const fs::path rel(e.path);
    bool inside = !e.path.empty() && rel.is_relative();
    for (const fs::path& part : rel) {
      inside = inside && part != ".." && part != "." && !part.empty();
    }
    if (!inside) return bad("names '" + e.path + "', a path outside the folder");
    if (e.how != "pytorch" && e.how != "safetensors" && e.how != "tree" && e.how != "bytes") {
      return bad("says '" + e.path + "' is '" + e.how + "'");
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status WriteBytes(const std::string& path, std::span<const std::byte> bytes) {
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, PosixFileSystem().OpenForWrite(path));
  RCKPT_RETURN_IF_ERROR(f->Append(bytes));
  RCKPT_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

Status WriteEntry(const Checkpoint& bundle, const Entry& e, const std::string& dst) {
  const fs::path path = fs::path(dst) / e.path;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) {
    return Status::IoError("cannot create '" + path.parent_path().string() + "': " + ec.message());
  }
  if (e.how == "bytes") {
    const TensorEntry* t = bundle.FindTensor(FileName(e.path));
    if (t == nullptr || t->tensor.dtype() != DType::kU8) {
      return Status::Corruption("no uint8 tensor '" + FileName(e.path) + "' holds its bytes");
    }
    return WriteBytes(path.string(), t->tensor.host_bytes());
  }
  RCKPT_ASSIGN_OR_RETURN(Checkpoint part, convert::UnbundlePart(bundle, e.key));
  if (e.how == "pytorch") return ExportPyTorch(part, path.string());
  return ExportSafetensors(part, path.string());
}

nb::list UnpackFolder(const std::string& src, const std::string& dst) {
  std::optional<Checkpoint> bundle;
  std::vector<Entry> entries;
  std::vector<std::pair<std::string, Value>> trees;
  Status s;
  {
    nb::gil_scoped_release release;
    Result<Checkpoint> read = ReadAnyCheckpoint(src);
    s = read.status();
    if (s.ok()) {
      bundle.emplace(*std::move(read));
      auto manifest = ReadManifest(*bundle, src);
      s = manifest.status();
      if (s.ok()) entries = *std::move(manifest);
    }
    for (const Entry& e : entries) {
      if (!s.ok()) break;
      if (e.how == "tree") {
        auto part = convert::UnbundlePart(*bundle, e.key);
        s = part.status();
        if (s.ok()) trees.emplace_back(e.path, part->Tree());
      } else {
        s = WriteEntry(*bundle, e, dst);
      }
      s = s.WithContext("'" + e.path + "'");
    }
  }
  ThrowIfError(s);
  nb::list out;
  for (const auto& [path, tree] : trees) {
    out.append(nb::make_tuple(path, TreeToPython(tree, *bundle, nb::dict())));
  }
  return out;
}

}  // namespace

void RegisterFolder(nb::module_& m) {
  m.def("pack_folder", &PackFolder, "dst"_a, "entries"_a, "options"_a);
  m.def("unpack_folder", &UnpackFolder, "src"_a, "dst"_a);
}

}  // namespace rckpt::python
