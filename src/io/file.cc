// The default implementations of the file interfaces' optional methods,
// written over their required ones so every FileSystem (POSIX, in-memory, a
// caller's own) has them.
#include "rckpt/file.h"

#include <algorithm>
#include <string>
#include <vector>

#include "io/atomic_write.h"

namespace rckpt {
namespace {

// Adds `path` to `out`: a file with its size, or every file below it when it
// is a directory. Entries that vanish while listed are left out.
Status AddTree(FileSystem& fs, const std::string& path, std::vector<FileInfo>* out) {
  Result<std::unique_ptr<RandomAccessFile>> file = fs.OpenForRead(path);
  if (file.ok()) {
    out->push_back(FileInfo{path, (*file)->Size(), 0});
    return Status::Ok();
  }
  if (file.status().code() == StatusCode::kNotFound) return Status::Ok();
  if (file.status().code() != StatusCode::kInvalidArgument) return file.status();
  Result<std::vector<std::string>> names = fs.ListDir(path);
  if (!names.ok()) {
    // A special file (a FIFO, a socket) is neither read nor walked.
    return names.status().code() == StatusCode::kInvalidArgument ||
                   names.status().code() == StatusCode::kNotFound
               ? Status::Ok()
               : names.status();
  }
  const std::string dir = path.ends_with('/') ? path : path + "/";
  for (const std::string& name : *names) RCKPT_RETURN_IF_ERROR(AddTree(fs, dir + name, out));
  return Status::Ok();
}

}  // namespace

Status RandomAccessFile::ReadRanges(std::span<const ReadRange> ranges) const {
  for (const ReadRange& r : ranges) RCKPT_RETURN_IF_ERROR(ReadAt(r.offset, r.dst));
  return Status::Ok();
}

Result<std::unique_ptr<AtomicWritableFile>> FileSystem::OpenForAtomicWrite(
    const std::string& path, uint64_t /*expected_size*/) {
  return OpenLocalAtomicFile(*this, path);
}

Result<std::unique_ptr<AtomicWritableFile>> FileSystem::OpenForAtomicCreate(
    const std::string& path, uint64_t /*expected_size*/) {
  return OpenLocalAtomicFile(*this, path, /*replace=*/false);
}

Status FileSystem::RenameNoReplace(const std::string& /*from*/, const std::string& to) {
  return Status::Unsupported("create '" + to +
                             "' without replacing: this file system has no RenameNoReplace");
}

Result<std::vector<FileInfo>> FileSystem::List(const std::string& prefix) {
  // The directory part is listed; its entries that continue the prefix are
  // taken whole.
  const size_t slash = prefix.rfind('/');
  const std::string dir_part = slash == std::string::npos ? "" : prefix.substr(0, slash + 1);
  const std::string rest = prefix.substr(dir_part.size());
  Result<std::vector<std::string>> names = ListDir(dir_part.empty()  ? "."
                                                   : dir_part == "/" ? "/"
                                                                     : dir_part.substr(0, slash));
  std::vector<FileInfo> out;
  if (!names.ok()) {
    if (names.status().code() == StatusCode::kNotFound) return out;
    return names.status();
  }
  for (const std::string& name : *names) {
    if (!name.starts_with(rest)) continue;
    RCKPT_RETURN_IF_ERROR(AddTree(*this, dir_part + name, &out));
  }
  std::sort(out.begin(), out.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.path < b.path; });
  return out;
}

Result<std::vector<IncompleteWrite>> FileSystem::ListIncomplete(const std::string& prefix) {
  RCKPT_ASSIGN_OR_RETURN(std::vector<FileInfo> files, List(prefix));
  std::vector<IncompleteWrite> out;
  for (const FileInfo& f : files) {
    IncompleteWrite w;
    pid_t pid = 0;
    if (!ParseTempPath(f.path, &w.path, &pid)) continue;
    w.id = f.path;
    w.started_unix_ms = f.modified_unix_ms;
    w.writer_alive = !ProcessIsDead(pid);
    out.push_back(std::move(w));
  }
  return out;
}

Status FileSystem::AbortIncomplete(const IncompleteWrite& write) {
  std::string path;
  pid_t pid = 0;
  if (!ParseTempPath(write.id, &path, &pid) || path != write.path) {
    return Status::InvalidArgument("'" + write.id + "' is not a temporary of a save to '" +
                                   write.path + "'");
  }
  if (!ProcessIsDead(pid)) {
    return Status::InvalidArgument("'" + write.id + "' is still being written by process " +
                                   std::to_string(pid));
  }
  return Remove(write.id);
}

Status FileSystem::CreateDir(const std::string& /*path*/) { return Status::Ok(); }

Status FileSystem::RemoveAll(const std::string& path) { return Remove(path); }

Result<std::unique_ptr<PositionedWritableFile>> FileSystem::OpenForPositionedWrite(
    const std::string& path) {
  return Status::Unsupported("'" + path +
                             "': this file system has no positioned writes (a write at an "
                             "offset of an existing file)");
}

namespace {

Status NoSharedWrites(const std::string& path) {
  return Status::Unsupported(
      "'" + path +
      "': this file system has no shared writes (parts "
      "uploaded by several processes); they are object storage's");
}

}  // namespace

Result<SharedWrite> FileSystem::StartSharedWrite(const std::string& path) {
  return NoSharedWrites(path);
}

Result<std::unique_ptr<SharedWriteRegion>> FileSystem::OpenSharedWriteRegion(
    const std::string& path, const SharedWrite& /*write*/,
    uint64_t /*first_part*/, std::vector<uint64_t> /*part_bytes*/) {
  return NoSharedWrites(path);
}

Status FileSystem::CommitSharedWrite(const std::string& path,
                                     const SharedWrite& /*write*/,
                                     std::span<const SharedPart> /*parts*/) {
  return NoSharedWrites(path);
}

Status FileSystem::AbortSharedWrite(const std::string& path,
                                    const SharedWrite& /*write*/) {
  return NoSharedWrites(path);
}

Result<bool> FileSystem::SharedWriteCommitted(const std::string& path,
                                              const SharedWrite& /*write*/) {
  return NoSharedWrites(path);
}

}  // namespace rckpt
