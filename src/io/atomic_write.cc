#include "io/atomic_write.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "util/hex.h"

namespace rckpt {
namespace {

uint64_t RandomSuffix() {
  // One engine per thread, seeded once from the OS, so concurrent saves need
  // no lock and never share a name.
  thread_local std::mt19937_64 engine = [] {
    const auto pid = static_cast<unsigned>(::getpid());
    try {
      std::random_device rd;
      std::seed_seq seq{rd(), rd(), rd(), rd(), pid};
      return std::mt19937_64(seq);
    } catch (...) {
      // No OS entropy source: the clock, pid and a stack address still
      // differ between concurrent saves.
      int marker = 0;
      const auto now = static_cast<uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count());
      std::seed_seq seq{
          static_cast<unsigned>(now), static_cast<unsigned>(now >> 32), pid,
          static_cast<unsigned>(reinterpret_cast<uintptr_t>(&marker))};
      return std::mt19937_64(seq);
    }
  }();
  return engine();
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Parses "<pid>-<16 hex>" (the part of a temporary's name after ".tmp-").
bool ParseTempSuffix(std::string_view s, pid_t* pid) {
  const size_t dash = s.find('-');
  if (dash == 0 || dash == std::string_view::npos) return false;
  const std::string_view digits = s.substr(0, dash);
  const std::string_view hex = s.substr(dash + 1);
  if (hex.size() != 16) return false;
  for (char c : hex) {
    if (!IsHex(c)) return false;
  }
  long long value = 0;
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  if (value <= 0 || value > std::numeric_limits<pid_t>::max()) return false;
  *pid = static_cast<pid_t>(value);
  return true;
}

}  // namespace

bool ProcessIsDead(pid_t pid) {
  // EPERM means the process exists under another user: alive.
  if (::kill(pid, 0) == -1) return errno == ESRCH;
  // A zombie (exited, not yet reaped: its parent died and no init reaps it,
  // as in some containers) never writes again.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t comm_end = line.rfind(')');
  return comm_end != std::string::npos && comm_end + 2 < line.size() && line[comm_end + 2] == 'Z';
}

namespace {

// The user's path is what an error names, never the temporary: a failure to
// create, write or rename it is a failure to write `path`.
Status NamingThePath(const Status& s, const std::string& temp, const std::string& path) {
  if (s.ok()) return s;
  std::string message = s.message();
  const std::string rename = "rename '" + temp + "' to '" + path + "'";
  for (size_t at = message.find(rename); at != std::string::npos; at = message.find(rename)) {
    message.replace(at, rename.size(), "replace '" + path + "'");
  }
  for (size_t at = message.find(temp); at != std::string::npos; at = message.find(temp, at)) {
    message.replace(at, temp.size(), path);
    at += path.size();
  }
  return Status(s.code(), std::move(message));
}

}  // namespace

std::string TempPathFor(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long long>(::getpid())) + "-" +
         HexDigits(RandomSuffix(), 16);
}

void RemoveStaleTemps(FileSystem& fs, const std::string& path) {
  const std::filesystem::path p(path);
  const std::string base = p.filename().string();
  if (base.empty()) return;
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  Result<std::vector<std::string>> names = fs.ListDir(dir);
  if (!names.ok()) return;
  const std::string prefix = base + ".tmp-";
  for (const std::string& name : *names) {
    if (!name.starts_with(prefix)) continue;
    pid_t pid = 0;
    if (!ParseTempSuffix(std::string_view(name).substr(prefix.size()), &pid)) {
      continue;
    }
    // A pid from another PID namespace sharing this directory looks dead
    // here; its save then fails at the rename instead of corrupting data.
    if (!ProcessIsDead(pid)) continue;
    const std::string temp =
        p.has_parent_path() ? (p.parent_path() / name).string() : name;
    (void)fs.Remove(temp);  // best effort: another cleaner may have won
  }
}

Status RemoveIfExists(FileSystem& fs, const std::string& path) {
  Status s = fs.Remove(path);
  if (s.code() == StatusCode::kNotFound) return Status::Ok();
  return s;
}

AtomicFile::AtomicFile(FileSystem& fs, std::string path, bool replace)
    : fs_(fs), path_(std::move(path)), replace_(replace) {
  RemoveStaleTemps(fs_, path_);
  temp_ = TempPathFor(path_);
}

AtomicFile::~AtomicFile() {
  if (!committed_) (void)RemoveIfExists(fs_, temp_);
}

Result<std::unique_ptr<WritableFile>> AtomicFile::Open() {
  // A directory at the path, or a path in a directory that does not exist,
  // is refused before the first byte is written, naming the path.
  if (fs_.Exists(path_)) {
    Result<std::unique_ptr<RandomAccessFile>> existing = fs_.OpenForRead(path_);
    if (!existing.ok() && existing.status().code() == StatusCode::kInvalidArgument &&
        fs_.ListDir(path_).ok()) {
      return Status::InvalidArgument(
          "'" + path_ + "' is a directory: expected a file path such as '" +
          (std::filesystem::path(path_) / "checkpoint.rckpt").string() + "'");
    }
  }
  Result<std::unique_ptr<WritableFile>> file = fs_.OpenForWrite(temp_);
  if (file.ok()) return file;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (file.status().code() == StatusCode::kNotFound && !parent.empty() &&
      !fs_.Exists(parent.string())) {
    return Status::NotFound("directory '" + parent.string() + "' does not exist (create it first)");
  }
  return NamingThePath(file.status(), temp_, path_);
}

Status AtomicFile::Commit() {
  RCKPT_RETURN_IF_ERROR(NamingThePath(
      replace_ ? fs_.Rename(temp_, path_) : fs_.RenameNoReplace(temp_, path_), temp_, path_));
  committed_ = true;
  return fs_.SyncParentDir(path_);
}

namespace {

// A local AtomicWritableFile: the temporary of an AtomicFile, renamed over
// the path by Commit.
class LocalAtomicFile final : public AtomicWritableFile {
 public:
  LocalAtomicFile(std::unique_ptr<AtomicFile> target, std::unique_ptr<WritableFile> file)
      : target_(std::move(target)), file_(std::move(file)) {}
  ~LocalAtomicFile() override { (void)Abort(); }

  Status Append(std::span<const std::byte> data) override {
    if (file_ == nullptr) return Ended("append to");
    return Named(file_->Append(data));
  }
  Status Sync() override {
    if (file_ == nullptr) return Ended("sync");
    return Named(file_->Sync());
  }
  Status Close() override {
    if (file_ == nullptr) return Ended("close");
    if (closed_) return Status::Ok();
    closed_ = true;
    return Named(file_->Close());
  }
  Status Commit() override {
    if (file_ == nullptr) return Ended("commit");
    Status s = closed_ ? Status::Ok() : file_->Sync();
    Status closed = Close();
    if (s.ok()) s = closed;
    if (s.ok()) s = target_->Commit();
    s = Named(s);
    if (!s.ok()) (void)Abort();
    file_.reset();
    return s;
  }
  Status Abort() override {
    if (file_ == nullptr) return Status::Ok();
    if (!closed_) (void)file_->Close();
    file_.reset();
    target_.reset();  // removes the temporary
    return Status::Ok();
  }

 private:
  Status Named(const Status& s) const {
    return NamingThePath(s, target_->temp_path(), target_->path());
  }
  Status Ended(std::string_view op) const {
    return Status::InvalidArgument("cannot " + std::string(op) +
                                   " a write that was committed or aborted");
  }

  std::unique_ptr<AtomicFile> target_;
  std::unique_ptr<WritableFile> file_;  // null once committed or aborted
  bool closed_ = false;
};

}  // namespace

bool ParseTempPath(std::string_view temp, std::string* path, pid_t* pid) {
  const size_t at = temp.rfind(".tmp-");
  if (at == std::string_view::npos || at == 0) return false;
  const std::string_view rest = temp.substr(at + 5);
  if (!ParseTempSuffix(rest, pid)) return false;
  *path = std::string(temp.substr(0, at));
  return true;
}

Result<std::unique_ptr<AtomicWritableFile>> OpenLocalAtomicFile(FileSystem& fs,
                                                                const std::string& path,
                                                                bool replace) {
  auto target = std::make_unique<AtomicFile>(fs, path, replace);
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target->Open());
  return std::unique_ptr<AtomicWritableFile>(
      std::make_unique<LocalAtomicFile>(std::move(target), std::move(file)));
}

Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                           const std::function<Status(WritableFile&)>& write,
                           uint64_t expected_size, bool replace) {
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicWritableFile> file,
                         replace ? fs.OpenForAtomicWrite(path, expected_size)
                                 : fs.OpenForAtomicCreate(path, expected_size));
  Status s = write(*file);
  if (!s.ok()) {
    (void)file->Abort();
    return s;
  }
  return file->Commit();
}

}  // namespace rckpt
