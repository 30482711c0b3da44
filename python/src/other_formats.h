// The other formats rckpt reads (torch.save archives, safetensors files, DCP
// directories), from Python. rckpt.load and rckpt.load_into read such a file
// through a private .rckpt copy, so that the engine's placement and RNG rules
// apply to it unchanged; rckpt.convert does what `rckpt convert` does.
//
// Thread-safety: ImportToScratch runs without the GIL; the bindings take it.
#ifndef RCKPT_PYTHON_SRC_OTHER_FORMATS_H_
#define RCKPT_PYTHON_SRC_OTHER_FORMATS_H_

#include <nanobind/nanobind.h>

#include <string>

#include "rckpt/convert.h"

namespace rckpt::python {

namespace nb = nanobind;

// What ImportToScratch made of a file.
struct ScratchImport {
  CheckpointFormat format = CheckpointFormat::kRckpt;
  std::string dir;   // the private directory holding `path`; empty for an .rckpt
  std::string path;  // the .rckpt to load: the file itself, or <dir>/checkpoint.rckpt
  ImportReport report;
};

// Detects `path`'s format by its content, then by its extension. An .rckpt,
// or a file of no known format (which the rckpt reader then refuses, saying
// what is wrong), is loaded as it is. A file of another format is imported
// (`strict`: refusing classes outside the known set, as `rckpt convert
// --strict` does) and saved raw, without fsync, as <dir>/checkpoint.rckpt in a
// new private directory under the system's temporary directory (TMPDIR),
// which the caller removes; a DCP directory's tensors are staged there one at
// a time. Errors are the importer's, naming `path`; NotFound for a missing
// path; InvalidArgument for a directory that is not a DCP checkpoint.
// `fs` reads `path` (nullptr: DefaultFileSystem()); the copy is local.
Result<ScratchImport> ImportToScratch(const std::string& path, bool strict, int threads,
                                      FileSystem* fs = nullptr);

// rckpt._core.convert: `rckpt convert` from Python.
void RegisterOtherFormats(nb::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_OTHER_FORMATS_H_
