// rckpt._core's view of the file systems (rckpt/file.h through
// DefaultFileSystem(): s3:// URLs and local paths alike), for what the
// Python package writes itself (rckpt.storage: the manager's pointer and
// pruning, the plug-ins' small files).
#ifndef RCKPT_PYTHON_SRC_STORAGE_BINDING_H_
#define RCKPT_PYTHON_SRC_STORAGE_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

// storage_exists(path) -> bool
// storage_list(prefix) -> [(path, size, modified_unix_ms), ...], sorted
// storage_read(path) -> bytes
// storage_write(path, data, if_absent): atomic (OpenForAtomicWrite, or
//   OpenForAtomicCreate with if_absent: AlreadyExistsError when taken)
// storage_remove(path)
// storage_rename(src, dst, replace)
// storage_list_incomplete(prefix) -> [(path, id, started_unix_ms,
// writer_alive)] storage_abort_incomplete(path, id) Every call releases the GIL
// while it waits on the file system.
void RegisterStorage(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_STORAGE_BINDING_H_
