// rckpt._core.SaveOptions: the library's SaveOptions as one Python value,
// which every save front end of the package builds (rckpt.save, save_async,
// rckpt.distributed.save, rckpt.convert, rckpt.hf.pack) and every save
// binding takes whole. Its defaults are the library's struct; codec and
// shuffle are their names (ParseCodec, ParseShuffle); check() is the
// library's validation, so each option has one message wherever it is
// given.
//
// Thread-safety: call with the GIL held.
#ifndef RCKPT_PYTHON_SRC_OPTIONS_BINDING_H_
#define RCKPT_PYTHON_SRC_OPTIONS_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

void RegisterOptions(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_OPTIONS_BINDING_H_
