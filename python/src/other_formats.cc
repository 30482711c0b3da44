#include "other_formats.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "call_args.h"
#include "errors.h"
#include "rckpt/file.h"
#include "rckpt/human_bytes.h"
#include "rckpt/io.h"
#include "s3_binding.h"

namespace rckpt::python {
namespace {

namespace fs = std::filesystem;

// A file of the private copy: fsync is skipped, since the copy is read once
// and removed, and durability would only cost time.
class UnsyncedFile : public WritableFile {
 public:
  explicit UnsyncedFile(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  Status Append(std::span<const std::byte> data) override { return file_->Append(data); }
  Status Sync() override { return Status::Ok(); }
  Status Close() override { return file_->Close(); }

 private:
  std::unique_ptr<WritableFile> file_;
};

// The POSIX file system without fsync, for the private copy.
class ScratchFileSystem : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    return posix_.OpenForRead(path);
  }
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, posix_.OpenForWrite(path));
    return std::unique_ptr<WritableFile>(std::make_unique<UnsyncedFile>(std::move(file)));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    return posix_.Rename(from, to);
  }
  Status Remove(const std::string& path) override { return posix_.Remove(path); }
  Status SyncParentDir(const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return posix_.ListDir(dir);
  }
  bool Exists(const std::string& path) override { return posix_.Exists(path); }

 private:
  FileSystem& posix_ = PosixFileSystem();
};

// A new directory only this process uses, under TMPDIR.
Result<std::string> MakePrivateDir() {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string name = (base / "rckpt-import-XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr) {
    return Status::IoError("cannot create a private directory in '" + base.string() +
                           "' (TMPDIR) for the .rckpt copy: " +
                           std::generic_category().message(errno));
  }
  return name;
}

// Removes a private directory unless released.
class DirGuard {
 public:
  explicit DirGuard(std::string dir) : dir_(std::move(dir)) {}
  ~DirGuard() {
    if (dir_.empty()) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Release() { dir_.clear(); }

 private:
  std::string dir_;
};

// The reader of one format, the input format forced or detected.
Result<Checkpoint> ReadAs(CheckpointFormat format, const std::string& path,
                          const ImportOptions& options, ImportReport* report) {
  switch (format) {
    case CheckpointFormat::kPyTorch: return ImportPyTorch(path, options, report);
    case CheckpointFormat::kSafetensors: return ImportSafetensors(path, options, report);
    case CheckpointFormat::kDcp: return ImportDcp(path, options, report);
    case CheckpointFormat::kRckpt: {
      report->format = "rckpt";
      LoadOptions o;
      o.map_location = MapLocation::To(Device::Cpu());  // origins kept, bytes on the host
      o.fs = options.fs;
      return Load(path, o);
    }
    case CheckpointFormat::kUnknown: break;
  }
  return ReadAnyCheckpoint(path, options, report);
}

Status WriteAs(std::optional<CheckpointFormat> format, const Checkpoint& ck,
               const std::string& path, const ExportOptions& export_options,
               const SaveOptions& save_options) {
  if (!format) return WriteAnyCheckpoint(ck, path, export_options, save_options);
  switch (*format) {
    case CheckpointFormat::kPyTorch: return ExportPyTorch(ck, path, export_options);
    case CheckpointFormat::kSafetensors: return ExportSafetensors(ck, path, export_options);
    default: return Save(path, ck, save_options);
  }
}

// "rckpt", "pytorch", "safetensors" or "dcp" (the Python layer has mapped
// the aliases); "" is none.
std::optional<CheckpointFormat> FormatNamed(const std::string& name) {
  if (name.empty()) return std::nullopt;
  for (CheckpointFormat f : {CheckpointFormat::kRckpt, CheckpointFormat::kPyTorch,
                             CheckpointFormat::kSafetensors, CheckpointFormat::kDcp}) {
    if (CheckpointFormatName(f) == name) return f;
  }
  throw StatusError(Status::InvalidArgument("unknown format '" + name + "'"));
}

Shuffle ShuffleNamed(const std::string& name) {
  if (name == "auto") return Shuffle::kAuto;
  if (name == "on") return Shuffle::kOn;
  if (name == "off") return Shuffle::kOff;
  throw StatusError(
      Status::InvalidArgument("shuffle must be 'auto', 'on' or 'off', got '" + name + "'"));
}

// What `rckpt convert` checks of OUT before IN is read. An object-storage
// URL's form is checked; nothing is sent before the first bytes are written.
Status CheckDestination(const std::string& dst, std::optional<CheckpointFormat> to,
                        FileSystem* files) {
  auto names_a_format = [&]() -> Status {
    if (to || FormatFromExtension(dst) != CheckpointFormat::kUnknown) return Status::Ok();
    return Status::InvalidArgument(
        "dst '" + dst +
        "': no known extension (.rckpt; .pt .pth .bin .ckpt; .safetensors): name its format "
        "with to_format='rckpt', 'pt' or 'safetensors'");
  };
  if (IsObjectStoreUrl(dst)) {
    FileSystem& target = files ? *files : DefaultFileSystem();
    Result<std::unique_ptr<AtomicWritableFile>> w = target.OpenForAtomicWrite(dst);
    if (!w.ok()) return w.status().WithContext("dst '" + dst + "'");
    RCKPT_RETURN_IF_ERROR((*w)->Abort());
    return names_a_format();
  }
  std::error_code ec;
  if (fs::is_directory(dst, ec)) {
    return Status::InvalidArgument("dst '" + dst + "' is a directory: expected a file path such as '" +
                                   (fs::path(dst) / "out.rckpt").string() + "'");
  }
  const fs::path parent = fs::path(dst).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return Status::NotFound("dst '" + dst + "': directory '" + parent.string() +
                            "' does not exist (create it first)");
  }
  return names_a_format();
}

// A source that is none of the formats by content or by name.
Status CheckSourceNamesAFormat(const std::string& src, FileSystem* files) {
  Result<CheckpointFormat> detected = DetectFormat(src, files);
  if (!detected.ok() || *detected != CheckpointFormat::kUnknown ||
      FormatFromExtension(src) != CheckpointFormat::kUnknown) {
    return Status::Ok();  // a read that fails says why
  }
  return Status::Unsupported(
      "src '" + src +
      "': not a recognised checkpoint (rckpt, PyTorch zip, safetensors or a DCP directory) and "
      "no known extension: if it is one of them, name its format with from_format='rckpt', "
      "'pt', 'safetensors' or 'dcp'");
}

nb::list StringList(const std::vector<std::string>& items) {
  nb::list out;
  for (const std::string& s : items) out.append(nb::str(s.data(), s.size()));
  return out;
}

nb::dict Convert(const std::string& src, const std::string& dst, const std::string& from_format,
                 const std::string& to_format, bool strict, std::vector<std::string> rng_keys,
                 std::map<std::string, std::string> sections, bool drop_objects,
                 const std::string& codec, int level, uint64_t chunk_bytes,
                 const std::string& shuffle, std::map<std::string, std::string> set_device,
                 nb::object progress, nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  const std::optional<CheckpointFormat> from = FormatNamed(from_format);
  const std::optional<CheckpointFormat> to = FormatNamed(to_format);
  ImportOptions in;
  in.strict = strict;
  in.rng_keys = std::move(rng_keys);
  in.section_overrides = std::move(sections);
  in.fs = files.get();
  ExportOptions out;
  out.fs = files.get();
  out.drop_objects = drop_objects;
  ExportReport written;
  out.report = &written;
  Progress p(std::move(progress));
  SaveOptions save = SaveOptionsOf(codec, level, chunk_bytes, 0, nullptr, &p);
  save.shuffle = ShuffleNamed(shuffle);
  save.fs = files.get();
  std::map<Device, Device> devices;
  for (const auto& [k, v] : set_device) {
    devices[ValueOrThrow(ParseRecordedDevice(k))] = ValueOrThrow(ParseRecordedDevice(v));
  }
  // A DCP directory's tensors are staged beside the output, one at a time
  // (an object-storage output stages them in the temporary directory).
  std::error_code tmp_ec;
  in.scratch_dir = IsObjectStoreUrl(dst) ? fs::temp_directory_path(tmp_ec).string()
                                         : fs::path(dst).parent_path().string();
  if (in.scratch_dir.empty()) in.scratch_dir = ".";

  ImportReport report;
  Status s;
  std::optional<Checkpoint> ck;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    s = CheckDestination(dst, to, files.get());
    if (s.ok() && !from) s = CheckSourceNamesAFormat(src, files.get());
    if (s.ok()) {
      Result<Checkpoint> read = ReadAs(from.value_or(CheckpointFormat::kUnknown), src, in, &report);
      if (read.ok()) {
        ck.emplace(*std::move(read));
      } else {
        s = read.status();
      }
    }
    if (s.ok()) {
      // Only the recorded origins change; bytes stay as they are.
      for (TensorEntry& t : ck->mutable_tensors()) {
        if (auto it = devices.find(t.Origin()); it != devices.end()) t.origin = it->second;
      }
      for (RngRecord& r : ck->mutable_rng()) {
        if (auto it = devices.find(r.origin); it != devices.end()) r.origin = it->second;
      }
      s = WriteAs(to, *ck, dst, out, save);
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  p.RaiseIfPending();
  ThrowIfError(s);

  const uint64_t bytes = ck->TensorBytes();
  const size_t tensors = ck->tensors().size();
  const size_t rng = ck->rng().size();
  char line[128];
  std::snprintf(line, sizeof line, ": %zu tensor%s, %zu RNG record%s, %s in %.2f s (%s)", tensors,
                tensors == 1 ? "" : "s", rng, rng == 1 ? "" : "s", HumanBytes(bytes).c_str(),
                seconds, RenderRate(bytes, seconds).c_str());
  nb::dict r;
  r["format"] = report.format;
  r["tensors"] = tensors;
  r["rng_records"] = rng;
  r["bytes"] = bytes;
  r["seconds"] = seconds;
  r["summary"] = src + " -> " + dst + line;
  r["inert_classes"] = StringList(report.inert_classes);
  r["warnings"] = StringList(report.warnings);
  r["not_kept"] = StringList(written.not_kept);
  r["notes"] = StringList(written.notes);
  return r;
}

}  // namespace

Result<ScratchImport> ImportToScratch(const std::string& path, bool strict, int threads,
                                      FileSystem* files) {
  ScratchImport out;
  out.path = path;
  RCKPT_ASSIGN_OR_RETURN(CheckpointFormat detected, DetectFormat(path, files));
  out.format = detected == CheckpointFormat::kUnknown ? FormatFromExtension(path) : detected;
  if (out.format == CheckpointFormat::kRckpt || out.format == CheckpointFormat::kUnknown) {
    out.report.format = "rckpt";
    return out;
  }
  RCKPT_ASSIGN_OR_RETURN(out.dir, MakePrivateDir());
  DirGuard guard(out.dir);
  ImportOptions options;
  options.strict = strict;
  options.fs = files;
  if (out.format == CheckpointFormat::kDcp) options.scratch_dir = out.dir;
  Result<Checkpoint> ck = ReadAs(out.format, path, options, &out.report);
  if (!ck.ok()) {
    const Status& s = ck.status();
    if (s.message().find(path) != std::string::npos) return s;
    return Status(s.code(), "'" + path + "': " + s.message());  // the importer's part names no file
  }
  out.path = (fs::path(out.dir) / "checkpoint.rckpt").string();
  static ScratchFileSystem* scratch = new ScratchFileSystem;
  SaveOptions save;
  save.threads = threads;
  save.fs = scratch;
  Status s = Save(out.path, *ck, save);
  if (!s.ok()) {
    return Status(s.code(), "'" + path + "': writing its .rckpt copy in '" + out.dir +
                                "' (TMPDIR): " + s.message());
  }
  guard.Release();
  return out;
}

void RegisterOtherFormats(nb::module_& m) {
  using namespace nb::literals;
  m.def("convert", &Convert, "src"_a, "dst"_a, "from_format"_a, "to_format"_a, "strict"_a,
        "rng_keys"_a, "sections"_a, "drop_objects"_a, "codec"_a, "level"_a, "chunk_bytes"_a,
        "shuffle"_a, "set_device"_a, "progress"_a.none(), "fs"_a.none() = nb::none());
}

}  // namespace rckpt::python
