#include "io/url_file_system.h"

#include <unistd.h>

#include <cctype>
#include <utility>

namespace rckpt {
namespace {

// The one form of an object-storage URL's scheme: lower case, as the AWS CLI
// takes it ("S3://" is a local path to it, and fsspec knows no "S3"
// protocol).
constexpr std::string_view kObjectStoreScheme = "s3://";

}  // namespace

bool IsObjectStoreUrl(std::string_view path) { return path.starts_with(kObjectStoreScheme); }

Status CheckSchemeCase(std::string_view path) {
  if (path.size() < kObjectStoreScheme.size() || IsObjectStoreUrl(path)) return Status::Ok();
  for (size_t i = 0; i < kObjectStoreScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(path[i])) != kObjectStoreScheme[i]) {
      return Status::Ok();
    }
  }
  std::string msg = "'";
  msg.append(path.substr(0, 200));
  msg.append("': an object-storage URL begins with ");
  msg.append(kObjectStoreScheme);
  msg.append(" in lower case (as the AWS CLI takes it), not '");
  msg.append(path.substr(0, kObjectStoreScheme.size()));
  msg.append("'");
  return Status::InvalidArgument(msg);
}

UrlFileSystem::UrlFileSystem(FileSystem& local, S3FileSystemFactory make_s3)
    : local_(local), make_s3_(std::move(make_s3)) {}

UrlFileSystem::UrlFileSystem(FileSystem& local, std::unique_ptr<FileSystem> s3) : local_(local) {
  s3_.emplace(std::move(s3));
}

Result<FileSystem*> UrlFileSystem::For(const std::string& path) {
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(path));
  if (!IsObjectStoreUrl(path)) return &local_;
  std::lock_guard<std::mutex> lock(mu_);
  if (s3_.has_value() && make_s3_ && s3_pid_ != ::getpid()) {
    // Forked since it was made: the parent's is left alone (its thread is
    // not in this process) and this process makes its own.
    if (s3_->ok()) (void)s3_->value().release();
    s3_.reset();
  }
  if (!s3_.has_value()) {
    s3_.emplace(make_s3_());
    s3_pid_ = ::getpid();
  }
  if (!s3_->ok()) return s3_->status();
  return s3_->value().get();
}

Result<std::unique_ptr<RandomAccessFile>> UrlFileSystem::OpenForRead(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenForRead(path);
}

Result<std::unique_ptr<WritableFile>> UrlFileSystem::OpenForWrite(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenForWrite(path);
}

Status UrlFileSystem::Rename(const std::string& from, const std::string& to) {
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(from));
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(to));
  if (IsObjectStoreUrl(from) != IsObjectStoreUrl(to)) {
    return Status::InvalidArgument("rename '" + from + "' to '" + to +
                                   "': cannot rename between object storage and a local disk");
  }
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(from));
  return fs->Rename(from, to);
}

Status UrlFileSystem::Remove(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->Remove(path);
}

Status UrlFileSystem::SyncParentDir(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->SyncParentDir(path);
}

Result<std::vector<std::string>> UrlFileSystem::ListDir(const std::string& dir) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(dir));
  return fs->ListDir(dir);
}

bool UrlFileSystem::Exists(const std::string& path) {
  Result<FileSystem*> fs = For(path);
  return fs.ok() && (*fs)->Exists(path);
}

Result<std::unique_ptr<AtomicWritableFile>> UrlFileSystem::OpenForAtomicWrite(
    const std::string& path, uint64_t expected_size) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenForAtomicWrite(path, expected_size);
}

Result<std::vector<FileInfo>> UrlFileSystem::List(const std::string& prefix) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(prefix));
  return fs->List(prefix);
}

Result<std::vector<IncompleteWrite>> UrlFileSystem::ListIncomplete(const std::string& prefix) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(prefix));
  return fs->ListIncomplete(prefix);
}

Status UrlFileSystem::AbortIncomplete(const IncompleteWrite& write) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(write.path));
  return fs->AbortIncomplete(write);
}

Result<std::unique_ptr<AtomicWritableFile>> UrlFileSystem::OpenForAtomicCreate(
    const std::string& path, uint64_t expected_size) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenForAtomicCreate(path, expected_size);
}

Status UrlFileSystem::RenameNoReplace(const std::string& from, const std::string& to) {
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(from));
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(to));
  if (IsObjectStoreUrl(from) != IsObjectStoreUrl(to)) {
    return Status::InvalidArgument("rename '" + from + "' to '" + to +
                                   "': cannot rename between object storage and a local disk");
  }
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(from));
  return fs->RenameNoReplace(from, to);
}

Status UrlFileSystem::CreateDir(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->CreateDir(path);
}

Status UrlFileSystem::RemoveAll(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->RemoveAll(path);
}

Result<std::unique_ptr<PositionedWritableFile>> UrlFileSystem::OpenForPositionedWrite(
    const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenForPositionedWrite(path);
}

Result<SharedWrite> UrlFileSystem::StartSharedWrite(const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->StartSharedWrite(path);
}

Result<std::unique_ptr<SharedWriteRegion>> UrlFileSystem::OpenSharedWriteRegion(
    const std::string& path, const SharedWrite& write, uint64_t first_part,
    std::vector<uint64_t> part_bytes) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->OpenSharedWriteRegion(path, write, first_part,
                                   std::move(part_bytes));
}

Status UrlFileSystem::CommitSharedWrite(const std::string& path,
                                        const SharedWrite& write,
                                        std::span<const SharedPart> parts) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->CommitSharedWrite(path, write, parts);
}

Status UrlFileSystem::AbortSharedWrite(const std::string& path,
                                       const SharedWrite& write) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->AbortSharedWrite(path, write);
}

Result<bool> UrlFileSystem::SharedWriteCommitted(const std::string& path,
                                                 const SharedWrite& write) {
  RCKPT_ASSIGN_OR_RETURN(FileSystem * fs, For(path));
  return fs->SharedWriteCommitted(path, write);
}

FileSystem& DefaultFileSystem() {
  // Never destroyed: saves may run on other threads while the process exits.
  static UrlFileSystem* fs = new UrlFileSystem(PosixFileSystem(), NewEnvironmentS3FileSystem);
  return *fs;
}

}  // namespace rckpt
