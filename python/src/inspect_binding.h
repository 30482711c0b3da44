// rckpt.inspect and rckpt.verify: `rckpt inspect` and `rckpt verify` from
// Python (the library's InspectRckpt and VerifyRckpt, their reports as
// dicts), with an explicit file system for s3:// URLs.
//
// Thread-safety: call with the GIL held; files are read with it released.
#ifndef RCKPT_PYTHON_SRC_INSPECT_BINDING_H_
#define RCKPT_PYTHON_SRC_INSPECT_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

// rckpt._core.inspect and rckpt._core.verify.
void RegisterInspect(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_INSPECT_BINDING_H_
