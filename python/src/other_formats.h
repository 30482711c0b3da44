// rckpt.convert: what `rckpt convert` does (the library's Convert), from
// Python. (rckpt.load reads the other formats through the library's LoadAny.)
//
// Thread-safety: the binding takes the GIL.
#ifndef RCKPT_PYTHON_SRC_OTHER_FORMATS_H_
#define RCKPT_PYTHON_SRC_OTHER_FORMATS_H_

#include <nanobind/nanobind.h>


namespace rckpt::python {

namespace nb = nanobind;

// rckpt._core.convert: `rckpt convert` from Python.
void RegisterOtherFormats(nb::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_OTHER_FORMATS_H_
