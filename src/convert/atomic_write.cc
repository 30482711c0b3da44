#include "convert/atomic_write.h"

#include "io/atomic_path.h"

namespace rckpt::convert {

Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                           const std::function<Status(WritableFile*)>& write) {
  RemoveStaleTemps(fs, path);
  const std::string tmp = TempPathFor(path);
  Status s = [&]() -> Status {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs.OpenForWrite(tmp));
    Status w = write(f.get());
    if (w.ok()) w = f->Sync();
    Status c = f->Close();
    RCKPT_RETURN_IF_ERROR(w);
    RCKPT_RETURN_IF_ERROR(c);
    RCKPT_RETURN_IF_ERROR(fs.Rename(tmp, path));
    return fs.SyncParentDir(path);
  }();
  if (!s.ok() && fs.Exists(tmp)) (void)fs.Remove(tmp);
  return s;
}

}  // namespace rckpt::convert
