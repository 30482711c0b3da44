#include "io/mem_file.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "rckpt/file.h"

namespace rckpt {
// Named (not anonymous) because MemFileSystem::Impl holds a MemState.
namespace mem_fs_internal {

// One file's bytes. A path maps to a shared_ptr of these, so replacing or
// removing the path leaves open readers and writers with the bytes they had,
// as an unlinked inode would.
struct MemData {
  mutable std::shared_mutex mu;
  std::vector<std::byte> bytes;
};

// The file system's state, shared with every open file so files may outlive
// the MemFileSystem.
struct MemState {
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<MemData>> files;
  MemFileSystem::Faults faults;

  MemFileSystem::Faults GetFaults() const {
    std::lock_guard<std::mutex> lock(mu);
    return faults;
  }
  // Whether some file lies under `dir` (mem directories exist implicitly).
  bool IsDir(const std::string& dir) const {
    const std::string prefix = dir.ends_with('/') ? dir : dir + "/";
    auto it = files.lower_bound(prefix);
    return it != files.end() && it->first.starts_with(prefix);
  }
};

namespace {

class MemRandomAccessFile final : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::shared_ptr<const MemData> data, std::string path)
      : data_(std::move(data)), path_(std::move(path)) {}

  uint64_t Size() const override {
    std::shared_lock<std::shared_mutex> lock(data_->mu);
    return data_->bytes.size();
  }

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    std::shared_lock<std::shared_mutex> lock(data_->mu);
    const uint64_t size = data_->bytes.size();
    if (offset > size || dst.size() > size - offset) {
      return Status::Corruption("'" + path_ + "' truncated: wanted " +
                                std::to_string(dst.size()) +
                                " bytes at offset " + std::to_string(offset) +
                                ", file has " + std::to_string(size));
    }
    if (!dst.empty()) {
      std::memcpy(dst.data(), data_->bytes.data() + offset, dst.size());
    }
    return Status::Ok();
  }

  // A private copy of the bytes, page-aligned as a real mapping is, so the
  // mapped load path runs on in-memory files too.
  Result<std::shared_ptr<std::byte>> MapPrivate() const override {
    std::shared_lock<std::shared_mutex> lock(data_->mu);
    const size_t n = data_->bytes.size();
    void* p = std::aligned_alloc(4096, (std::max<size_t>(n, 1) + 4095) & ~size_t{4095});
    if (p == nullptr) return Status::OutOfMemory("mapping '" + path_ + "'");
    if (n > 0) std::memcpy(p, data_->bytes.data(), n);
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                      [](std::byte* q) { std::free(q); });
  }

 private:
  const std::shared_ptr<const MemData> data_;
  const std::string path_;
};

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(std::shared_ptr<MemState> fs, std::shared_ptr<MemData> data,
                  std::string path)
      : fs_(std::move(fs)), data_(std::move(data)), path_(std::move(path)) {}

  Status Append(std::span<const std::byte> src) override {
    if (closed_) return Closed("append to");
    const uint64_t limit = fs_->GetFaults().fail_write_after_bytes;
    std::unique_lock<std::shared_mutex> lock(data_->mu);
    std::vector<std::byte>& bytes = data_->bytes;
    const uint64_t room = bytes.size() >= limit ? 0 : limit - bytes.size();
    // Like a full disk: what fits is written, then the write fails.
    const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), room));
    bytes.insert(bytes.end(), src.begin(), src.begin() + n);
    if (n < src.size()) {
      return Status::IoError("write '" + path_ + "' (" + std::to_string(n) +
                             " of " + std::to_string(src.size()) +
                             " bytes written): No space left on device");
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (closed_) return Closed("sync");
    if (fs_->GetFaults().fail_sync) {
      return Status::IoError("fsync '" + path_ + "': Input/output error");
    }
    return Status::Ok();
  }

  Status Close() override {
    if (closed_) return Closed("close");
    closed_ = true;
    return Status::Ok();
  }

 private:
  Status Closed(std::string_view op) const {
    return Status::InvalidArgument(std::string("cannot ") + std::string(op) +
                                   " '" + path_ + "': already closed");
  }

  const std::shared_ptr<MemState> fs_;
  const std::shared_ptr<MemData> data_;
  const std::string path_;
  bool closed_ = false;
};

// Writes at offsets into the bytes of a file that exists, with the
// faults of MemWritableFile. Several handles may write one file at once.
class MemPositionedFile final : public PositionedWritableFile {
 public:
  MemPositionedFile(std::shared_ptr<MemState> fs, std::shared_ptr<MemData> data,
                    std::string path)
      : fs_(std::move(fs)), data_(std::move(data)), path_(std::move(path)) {}

  Status WriteAt(uint64_t offset, std::span<const std::byte> src) override {
    if (closed_) return Closed("write to");
    const uint64_t limit = fs_->GetFaults().fail_write_after_bytes;
    std::unique_lock<std::shared_mutex> lock(data_->mu);
    std::vector<std::byte>& bytes = data_->bytes;
    // Like a full disk: what fits below the limit is written, then the
    // write fails.
    const uint64_t room = offset >= limit ? 0 : limit - offset;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), room));
    if (n > 0) {
      if (bytes.size() < offset + n) bytes.resize(offset + n);
      std::memcpy(bytes.data() + offset, src.data(), n);
    }
    if (n < src.size()) {
      return Status::IoError("write '" + path_ + "' at offset " + std::to_string(offset + n) +
                             ": No space left on device");
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (closed_) return Closed("sync");
    if (fs_->GetFaults().fail_sync) {
      return Status::IoError("fsync '" + path_ + "': Input/output error");
    }
    return Status::Ok();
  }

  Status Close() override {
    if (closed_) return Closed("close");
    closed_ = true;
    return Status::Ok();
  }

 private:
  Status Closed(std::string_view op) const {
    return Status::InvalidArgument(std::string("cannot ") + std::string(op) + " '" + path_ +
                                   "': already closed");
  }

  const std::shared_ptr<MemState> fs_;
  const std::shared_ptr<MemData> data_;
  const std::string path_;
  bool closed_ = false;
};

}  // namespace
}  // namespace mem_fs_internal

using mem_fs_internal::MemData;
using mem_fs_internal::MemPositionedFile;
using mem_fs_internal::MemRandomAccessFile;
using mem_fs_internal::MemState;
using mem_fs_internal::MemWritableFile;

struct MemFileSystem::Impl {
  std::shared_ptr<MemState> state = std::make_shared<MemState>();
};

MemFileSystem::MemFileSystem() : impl_(std::make_unique<Impl>()) {}
MemFileSystem::~MemFileSystem() = default;

void MemFileSystem::SetFile(const std::string& path,
                            std::vector<std::byte> bytes) {
  auto data = std::make_shared<MemData>();
  data->bytes = std::move(bytes);
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  impl_->state->files[path] = std::move(data);
}

const std::vector<std::byte>* MemFileSystem::GetFile(
    const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  auto it = impl_->state->files.find(path);
  return it == impl_->state->files.end() ? nullptr : &it->second->bytes;
}

void MemFileSystem::SetFaults(const Faults& faults) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  impl_->state->faults = faults;
}

Result<std::unique_ptr<RandomAccessFile>> MemFileSystem::OpenForRead(
    const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  auto it = impl_->state->files.find(path);
  if (it == impl_->state->files.end()) {
    if (impl_->state->IsDir(path)) {
      return Status::InvalidArgument("open '" + path +
                                     "': expected a regular file, found a "
                                     "directory");
    }
    return Status::NotFound("open '" + path + "': No such file or directory");
  }
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<MemRandomAccessFile>(it->second, path));
}

Result<std::unique_ptr<WritableFile>> MemFileSystem::OpenForWrite(
    const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  if (impl_->state->IsDir(path)) {
    return Status::InvalidArgument("create '" + path + "': Is a directory");
  }
  auto data = std::make_shared<MemData>();
  impl_->state->files[path] = data;
  return std::unique_ptr<WritableFile>(
      std::make_unique<MemWritableFile>(impl_->state, std::move(data), path));
}

Result<std::unique_ptr<PositionedWritableFile>> MemFileSystem::OpenForPositionedWrite(
    const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  auto it = impl_->state->files.find(path);
  if (it == impl_->state->files.end()) {
    return Status::NotFound("open '" + path + "' for writing: No such file or directory");
  }
  return std::unique_ptr<PositionedWritableFile>(
      std::make_unique<MemPositionedFile>(impl_->state, it->second, path));
}

Status MemFileSystem::CreateDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  if (impl_->state->files.count(path) > 0) {
    return Status::InvalidArgument("create directory '" + path + "': a file is there");
  }
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (impl_->state->files.count(path.substr(0, slash)) > 0) {
      return Status::InvalidArgument("create directory '" + path +
                                     "': a file is in the way (Not a directory)");
    }
  }
  return Status::Ok();
}

Status MemFileSystem::RemoveAll(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  auto& files = impl_->state->files;
  bool found = files.erase(path) > 0;
  const std::string dir = path.ends_with('/') ? path : path + "/";
  for (auto it = files.lower_bound(dir); it != files.end() && it->first.starts_with(dir);) {
    it = files.erase(it);
    found = true;
  }
  if (!found) return Status::NotFound("remove '" + path + "': No such file or directory");
  return Status::Ok();
}

Status MemFileSystem::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  if (impl_->state->faults.fail_rename) {
    return Status::IoError("rename '" + from + "' to '" + to +
                           "': Input/output error");
  }
  auto it = impl_->state->files.find(from);
  if (it == impl_->state->files.end()) {
    return Status::NotFound("rename '" + from + "' to '" + to +
                            "': No such file or directory");
  }
  if (from == to) return Status::Ok();
  std::shared_ptr<MemData> data = std::move(it->second);
  impl_->state->files.erase(it);
  impl_->state->files[to] = std::move(data);
  return Status::Ok();
}

Status MemFileSystem::Remove(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  if (impl_->state->files.erase(path) == 0) {
    return Status::NotFound("remove '" + path + "': No such file or directory");
  }
  return Status::Ok();
}

Status MemFileSystem::SyncParentDir(const std::string& /*path*/) {
  return Status::Ok();
}

Result<std::vector<std::string>> MemFileSystem::ListDir(
    const std::string& dir) {
  // "" and "." list the paths without a directory part.
  std::string prefix;
  if (!dir.empty() && dir != ".") prefix = dir.ends_with('/') ? dir : dir + "/";
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  std::vector<std::string> names;
  for (auto it = impl_->state->files.lower_bound(prefix);
       it != impl_->state->files.end() && it->first.starts_with(prefix); ++it) {
    std::string_view rest = std::string_view(it->first).substr(prefix.size());
    const size_t slash = rest.find('/');
    // A file deeper down makes a subdirectory entry, listed once.
    std::string name(rest.substr(0, slash));
    if (!name.empty() && (names.empty() || names.back() != name)) {
      names.push_back(std::move(name));
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

bool MemFileSystem::Exists(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  return impl_->state->files.count(path) > 0 || impl_->state->IsDir(path);
}

}  // namespace rckpt
