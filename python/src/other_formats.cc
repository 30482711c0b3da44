#include "other_formats.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <system_error>
#include <vector>

#include "call_args.h"
#include "errors.h"
#include "rckpt/file.h"
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

nb::list StringList(const std::vector<std::string>& items) {
  nb::list out;
  for (const std::string& s : items) out.append(nb::str(s.data(), s.size()));
  return out;
}

// An optional format name ("" for none), parsed by the library's table.
CheckpointFormat FormatNamed(const std::string& name) {
  if (name.empty()) return CheckpointFormat::kUnknown;
  return ValueOrThrow(ParseCheckpointFormat(name));
}

nb::dict Convert(const std::string& src, const std::string& dst, const std::string& from_format,
                 const std::string& to_format, bool strict, std::vector<std::string> rng_keys,
                 std::map<std::string, std::string> sections, bool drop_objects,
                 const std::string& codec, int level, uint64_t chunk_bytes,
                 const std::string& shuffle, const std::string& set_device, nb::object progress,
                 nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  ConvertOptions o;
  o.from = FormatNamed(from_format);
  o.to = FormatNamed(to_format);
  o.import.strict = strict;
  o.import.rng_keys = std::move(rng_keys);
  o.import.section_overrides = std::move(sections);
  o.exporter.drop_objects = drop_objects;
  o.save.codec = ValueOrThrow(rckpt::ParseCodec(codec));
  o.save.level = level;
  o.save.chunk_bytes = chunk_bytes;
  o.save.shuffle = ValueOrThrow(ParseShuffle(shuffle));
  if (!set_device.empty()) o.set_device = ValueOrThrow(MapLocation::Parse(set_device, "set_device"));
  o.fs = files.get();
  Progress p(std::move(progress));
  o.save.progress = p.Callback();

  ConvertReport report;
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::Convert(src, dst, o, &report);
  }
  p.RaiseIfPending();
  ThrowIfError(s);

  nb::dict r;
  r["format"] = report.read.format;
  r["tensors"] = report.tensors;
  r["rng_records"] = report.rng_records;
  r["bytes"] = report.tensor_bytes;
  r["seconds"] = report.seconds;
  r["summary"] = report.summary;
  r["inert_classes"] = StringList(report.read.inert_classes);
  r["warnings"] = StringList(report.read.warnings);
  r["not_kept"] = StringList(report.written.not_kept);
  r["notes"] = StringList(report.written.notes);
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
  Result<Checkpoint> ck = ReadCheckpointAs(out.format, path, options, &out.report);
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
