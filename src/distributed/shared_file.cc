#include "distributed/shared_file.h"

namespace rckpt {
namespace {

// A rank's own handle of the file.
class PositionedFile : public SharedFile {
 public:
  explicit PositionedFile(std::unique_ptr<PositionedWritableFile> file) : file_(std::move(file)) {}

  Status WriteAt(uint64_t offset, std::span<const std::byte> data) override {
    return file_->WriteAt(offset, data);
  }

  Status SyncAndClose() override {
    Status s = file_->Sync();
    Status closed = file_->Close();
    return s.ok() ? closed : s;
  }

 private:
  std::unique_ptr<PositionedWritableFile> file_;
};

}  // namespace

SharedFileOpener PositionedFileOpener(FileSystem& fs) {
  return [&fs](Communicator&, const std::string& path) -> Result<std::unique_ptr<SharedFile>> {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<PositionedWritableFile> file,
                           fs.OpenForPositionedWrite(path));
    return std::unique_ptr<SharedFile>(std::make_unique<PositionedFile>(std::move(file)));
  };
}

}  // namespace rckpt
