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
#include "rckpt/file.h"

namespace rckpt::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Listed = std::tuple<std::string, uint64_t, int64_t>;
using Incomplete = std::tuple<std::string, std::string, int64_t, bool>;

bool Exists(const std::string& path) {
  nb::gil_scoped_release release;
  return DefaultFileSystem().Exists(path);
}

std::vector<Listed> List(const std::string& prefix) {
  Result<std::vector<FileInfo>> files = Status::IoError("not listed");
  {
    nb::gil_scoped_release release;
    files = DefaultFileSystem().List(prefix);
  }
  std::vector<Listed> out;
  for (const FileInfo& f : ValueOrThrow(std::move(files))) {
    out.emplace_back(f.path, f.size, f.modified_unix_ms);
  }
  return out;
}

nb::bytes Read(const std::string& path) {
  std::string data;
  Status s;
  {
    nb::gil_scoped_release release;
    Result<std::unique_ptr<RandomAccessFile>> file =
        DefaultFileSystem().OpenForRead(path);
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

void Write(const std::string& path, nb::bytes data, bool if_absent) {
  // The bytes are copied so the GIL can go while they are written.
  const std::string bytes(data.c_str(), data.size());
  Status s;
  {
    nb::gil_scoped_release release;
    FileSystem& fs = DefaultFileSystem();
    Result<std::unique_ptr<AtomicWritableFile>> file =
        if_absent ? fs.OpenForAtomicCreate(path, bytes.size())
                  : fs.OpenForAtomicWrite(path, bytes.size());
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

void Remove(const std::string& path) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = DefaultFileSystem().Remove(path);
  }
  ThrowIfError(s);
}

void Rename(const std::string& from, const std::string& to, bool replace) {
  Status s;
  {
    nb::gil_scoped_release release;
    FileSystem& fs = DefaultFileSystem();
    s = replace ? fs.Rename(from, to) : fs.RenameNoReplace(from, to);
    if (s.ok()) s = fs.SyncParentDir(to);
  }
  ThrowIfError(s);
}

std::vector<Incomplete> ListIncomplete(const std::string& prefix) {
  Result<std::vector<IncompleteWrite>> writes = Status::IoError("not listed");
  {
    nb::gil_scoped_release release;
    writes = DefaultFileSystem().ListIncomplete(prefix);
  }
  std::vector<Incomplete> out;
  for (const IncompleteWrite& w : ValueOrThrow(std::move(writes))) {
    out.emplace_back(w.path, w.id, w.started_unix_ms, w.writer_alive);
  }
  return out;
}

void AbortIncomplete(const std::string& path, const std::string& id) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = DefaultFileSystem().AbortIncomplete(
        IncompleteWrite{path, id, 0, false});
  }
  ThrowIfError(s);
}

}  // namespace

void RegisterStorage(nb::module_& m) {
  m.def("storage_exists", &Exists, "path"_a);
  m.def("storage_list", &List, "prefix"_a);
  m.def("storage_read", &Read, "path"_a);
  m.def("storage_write", &Write, "path"_a, "data"_a, "if_absent"_a);
  m.def("storage_remove", &Remove, "path"_a);
  m.def("storage_rename", &Rename, "src"_a, "dst"_a, "replace"_a);
  m.def("storage_list_incomplete", &ListIncomplete, "prefix"_a);
  m.def("storage_abort_incomplete", &AbortIncomplete, "path"_a, "id"_a);
}

}  // namespace rckpt::python
