// LoadAny (convert.h): one load of any format. A file of another format is
// imported into a private .rckpt copy that rckpt::Load then reads, so the
// engine's placement, section and RNG rules apply to it unchanged.
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "engine/placement.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/io.h"

namespace rckpt {
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

// Removes a private directory when it goes.
class DirGuard {
 public:
  explicit DirGuard(std::string dir) : dir_(std::move(dir)) {}
  ~DirGuard() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

 private:
  std::string dir_;
};

// `s` with every mention of `from` replaced by `to`: a load's errors name
// the file the caller gave, never its private copy.
Status Renamed(const Status& s, const std::string& from, const std::string& to) {
  std::string message = s.message();
  for (size_t at = message.find(from); at != std::string::npos;
       at = message.find(from, at + to.size())) {
    message.replace(at, from.size(), to);
  }
  return Status(s.code(), message);
}

}  // namespace

Result<Checkpoint> LoadAny(const std::string& path, const LoadOptions& options,
                           const ImportOptions& import, ImportReport* report) {
  // The options are checked before anything is read, as Load checks them
  // before it opens its file; an import can be long.
  DeviceInventory devices(options.runtime != nullptr ? *options.runtime : DefaultRuntime(),
                          options.auto_device);
  RCKPT_RETURN_IF_ERROR(CheckLoadOptions(options, devices));
  ImportOptions io = import;
  if (io.fs == nullptr) io.fs = options.fs;
  RCKPT_ASSIGN_OR_RETURN(CheckpointFormat format, DetectFormat(path, io.fs));
  if (format == CheckpointFormat::kUnknown) format = FormatFromExtension(path);
  if (format == CheckpointFormat::kRckpt || format == CheckpointFormat::kUnknown) {
    // A file of no known format is Load's to refuse, saying what is wrong.
    if (report != nullptr) report->format = "rckpt";
    return Load(path, options);
  }
  RCKPT_ASSIGN_OR_RETURN(std::string dir, MakePrivateDir());
  DirGuard guard(dir);
  if (format == CheckpointFormat::kDcp) io.scratch_dir = dir;
  Result<Checkpoint> ck = ReadCheckpointAs(format, path, io, report);
  if (!ck.ok()) {
    const Status& s = ck.status();
    if (s.message().find(path) != std::string::npos) return s;
    return Status(s.code(), "'" + path + "': " + s.message());  // the importer's part names no file
  }
  static ScratchFileSystem* scratch = new ScratchFileSystem;
  const std::string copy = (fs::path(dir) / "checkpoint.rckpt").string();
  SaveOptions save;
  save.threads = options.threads;
  save.fs = scratch;
  if (Status s = Save(copy, *ck, save); !s.ok()) {
    return Status(s.code(), "'" + path + "': writing its .rckpt copy in '" + dir +
                                "' (TMPDIR): " + s.message());
  }
  *ck = Checkpoint();  // the imported tensors go before the load allocates its own
  LoadOptions local = options;
  local.fs = scratch;
  Result<Checkpoint> loaded = Load(copy, local);
  if (!loaded.ok()) return Renamed(loaded.status(), copy, path);
  return loaded;  // a mapped load keeps the copy's pages when its name goes
}

}  // namespace rckpt
