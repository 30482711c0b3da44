#include "storage_binding.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "io/mem_file.h"
#include "io/url_file_system.h"
#include "rckpt/file.h"
#include "s3_binding.h"

namespace rckpt::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Listed = std::tuple<std::string, uint64_t, int64_t>;
using Incomplete = std::tuple<std::string, std::string, int64_t, bool>;

// The file system of `fs` (an rckpt._core.FileSystem made from
// rckpt.s3.S3Options), or the library's default one for None. The handle
// keeps the file system alive while the call runs.
struct Files {
  explicit Files(nb::handle fs) : held(FileSystemOf(fs)) {}
  FileSystem& operator*() const { return held ? *held : DefaultFileSystem(); }
  FileSystem* operator->() const { return &**this; }
  std::shared_ptr<FileSystem> held;
};

bool Exists(const std::string& path, nb::handle fs) {
  const Files chosen(fs);
  nb::gil_scoped_release release;
  return chosen->Exists(path);
}

std::vector<Listed> List(const std::string& prefix, nb::handle fs) {
  const Files chosen(fs);
  Result<std::vector<FileInfo>> files = Status::IoError("not listed");
  {
    nb::gil_scoped_release release;
    files = chosen->List(prefix);
  }
  std::vector<Listed> out;
  for (const FileInfo& f : ValueOrThrow(std::move(files))) {
    out.emplace_back(f.path, f.size, f.modified_unix_ms);
  }
  return out;
}

nb::bytes Read(const std::string& path, nb::handle fs) {
  const Files chosen(fs);
  std::string data;
  Status s;
  {
    nb::gil_scoped_release release;
    Result<std::unique_ptr<RandomAccessFile>> file = chosen->OpenForRead(path);
    s = file.status();
    if (s.ok()) {
      data.resize((*file)->Size());
      s = (*file)->ReadAt(
          0, std::as_writable_bytes(std::span<char>(data.data(), data.size())));
    }
  }
  ThrowIfError(s);
  return nb::bytes(data.data(), data.size());
}

void Write(const std::string& path, nb::bytes data, bool if_absent,
           nb::handle fs) {
  const Files chosen(fs);
  // The bytes are copied so the GIL can go while they are written.
  const std::string bytes(data.c_str(), data.size());
  Status s;
  {
    nb::gil_scoped_release release;
    FileSystem& target = *chosen;
    Result<std::unique_ptr<AtomicWritableFile>> file =
        if_absent ? target.OpenForAtomicCreate(path, bytes.size())
                  : target.OpenForAtomicWrite(path, bytes.size());
    s = file.status();
    if (s.ok()) {
      s = (*file)->Append(
          std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
      s = s.ok() ? (*file)->Commit() : s;
      if (!s.ok()) (void)(*file)->Abort();
    }
  }
  ThrowIfError(s);
}

void Remove(const std::string& path, nb::handle fs) {
  const Files chosen(fs);
  Status s;
  {
    nb::gil_scoped_release release;
    s = chosen->Remove(path);
  }
  ThrowIfError(s);
}

void CreateDir(const std::string& path, nb::handle fs) {
  const Files chosen(fs);
  Status s;
  {
    nb::gil_scoped_release release;
    s = chosen->CreateDir(path);
  }
  ThrowIfError(s);
}

void RemoveAll(const std::string& path, nb::handle fs) {
  const Files chosen(fs);
  Status s;
  {
    nb::gil_scoped_release release;
    s = chosen->RemoveAll(path);
  }
  ThrowIfError(s);
}

void Rename(const std::string& from, const std::string& to, bool replace,
            nb::handle fs) {
  const Files chosen(fs);
  Status s;
  {
    nb::gil_scoped_release release;
    FileSystem& target = *chosen;
    s = replace ? target.Rename(from, to) : target.RenameNoReplace(from, to);
    if (s.ok()) s = target.SyncParentDir(to);
  }
  ThrowIfError(s);
}

std::vector<Incomplete> ListIncomplete(const std::string& prefix,
                                       nb::handle fs) {
  const Files chosen(fs);
  Result<std::vector<IncompleteWrite>> writes = Status::IoError("not listed");
  {
    nb::gil_scoped_release release;
    writes = chosen->ListIncomplete(prefix);
  }
  std::vector<Incomplete> out;
  for (const IncompleteWrite& w : ValueOrThrow(std::move(writes))) {
    out.emplace_back(w.path, w.id, w.started_unix_ms, w.writer_alive);
  }
  return out;
}

void AbortIncomplete(const std::string& path, const std::string& id,
                     nb::handle fs) {
  const Files chosen(fs);
  Status s;
  {
    nb::gil_scoped_release release;
    s = chosen->AbortIncomplete(IncompleteWrite{path, id, 0, false});
  }
  ThrowIfError(s);
}

// The library's one answer to "is this an object-storage URL?"
// (IsObjectStoreUrl), the scheme in another case refused (CheckSchemeCase),
// for rckpt.s3.is_url. `path`: the path's bytes (os.fsencode).
bool IsUrl(nb::bytes path) {
  const std::string_view p(path.c_str(), path.size());
  ThrowIfError(CheckSchemeCase(p));
  return IsObjectStoreUrl(p);
}

// The test seam of the Python layer, as src/io/mem_file.h is the C++
// tests': an in-memory file system with fault injection, passed where an
// rckpt._core.FileSystem goes.
FileSystemHandle MemoryFileSystem() {
  return FileSystemHandle{std::make_shared<MemFileSystem>(), "in memory (a test seam)"};
}

void SetMemoryFaults(const FileSystemHandle& handle, uint64_t fail_write_after_bytes,
                     bool fail_sync, bool fail_rename) {
  auto* mem = dynamic_cast<MemFileSystem*>(handle.fs.get());
  if (mem == nullptr) {
    throw nb::type_error("memory_file_system_faults: not a memory_file_system()");
  }
  mem->SetFaults({fail_write_after_bytes, fail_sync, fail_rename});
}

}  // namespace

void RegisterStorage(nb::module_& m) {
  m.def("storage_exists", &Exists, "path"_a, "fs"_a.none() = nb::none());
  m.def("storage_list", &List, "prefix"_a, "fs"_a.none() = nb::none());
  m.def("storage_read", &Read, "path"_a, "fs"_a.none() = nb::none());
  m.def("storage_write", &Write, "path"_a, "data"_a, "if_absent"_a,
        "fs"_a.none() = nb::none());
  m.def("storage_remove", &Remove, "path"_a, "fs"_a.none() = nb::none());
  m.def("is_object_store_url", &IsUrl, "path"_a);
  m.def("memory_file_system", &MemoryFileSystem);
  m.def("memory_file_system_faults", &SetMemoryFaults, "fs"_a,
        "fail_write_after_bytes"_a = UINT64_MAX, "fail_sync"_a = false,
        "fail_rename"_a = false);
  m.def("storage_create_dir", &CreateDir, "path"_a, "fs"_a.none() = nb::none());
  m.def("storage_remove_all", &RemoveAll, "path"_a, "fs"_a.none() = nb::none());
  m.def("storage_rename", &Rename, "src"_a, "dst"_a, "replace"_a,
        "fs"_a.none() = nb::none());
  m.def("storage_list_incomplete", &ListIncomplete, "prefix"_a,
        "fs"_a.none() = nb::none());
  m.def("storage_abort_incomplete", &AbortIncomplete, "path"_a, "id"_a,
        "fs"_a.none() = nb::none());
}

}  // namespace rckpt::python
