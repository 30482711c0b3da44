#include "distributed/shared_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>


namespace rckpt {
namespace {

Status ErrnoStatus(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

class PositionedFile : public SharedFile {
 public:
  PositionedFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PositionedFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                                 static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return ErrnoStatus("write '" + path_ + "' at offset " + std::to_string(offset + done));
      }
      if (n == 0) {
        return Status::IoError("write '" + path_ + "' at offset " +
                               std::to_string(offset + done) + ": no progress");
      }
      done += static_cast<size_t>(n);
    }
#ifdef __linux__
    // A hint, as the single-file writer's (io/posix_file.cc): the disk works
    // while this rank encodes more; errors surface at the sync.
    (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(data.size()),
                            SYNC_FILE_RANGE_WRITE);
#endif
    return Status::Ok();
  }

  Status SyncAndClose() override {
    Status s;
    if (::fsync(fd_) != 0) s = ErrnoStatus("sync '" + path_ + "'");
    if (::close(fd_) != 0 && s.ok()) s = ErrnoStatus("close '" + path_ + "'");
    fd_ = -1;
    return s;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<SharedFile>> OpenPositionedFile(Communicator&, const std::string& path) {
  // O_CLOEXEC: a training job that forks workers must not hand them the
  // checkpoint's descriptor.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open '" + path + "' for writing");
  return std::unique_ptr<SharedFile>(std::make_unique<PositionedFile>(fd, path));
}

}  // namespace rckpt
