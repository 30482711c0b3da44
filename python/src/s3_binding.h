// Object storage from Python: a file system with explicit S3 options
// (rckpt.s3.S3Options), handed to the save, load, convert, inspect and
// verify bindings as their `fs`, and the credential hand-over from botocore
// (a Python callable the library asks for credentials).
//
// Thread-safety: a FileSystem handle may be used from any thread; the
// credentials callable is called with the GIL taken.
#ifndef RCKPT_PYTHON_SRC_S3_BINDING_H_
#define RCKPT_PYTHON_SRC_S3_BINDING_H_

#include <nanobind/nanobind.h>

#include <memory>

#include "rckpt/file.h"

namespace rckpt::python {

namespace nb = nanobind;

// rckpt._core.FileSystem: a file system made by the library (for s3://
// URLs with explicit options; every other path goes to the local one).
struct FileSystemHandle {
  std::shared_ptr<FileSystem> fs;
  std::string description;  // endpoint and region, never a secret
};

// The file system of a binding's `fs` argument: None is nullptr (the
// library's DefaultFileSystem()), else a FileSystemHandle's. TypeError for
// anything else.
std::shared_ptr<FileSystem> FileSystemOf(nb::handle fs);

// s3_file_system, s3_credential_source, s3_supported and the FileSystem
// class.
void RegisterS3(nb::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_S3_BINDING_H_
