// rckpt._core's asynchronous saves: the AsyncSaver and SaveTicket classes
// that rckpt.save_async and rckpt.CheckpointManager are written over.
#ifndef RCKPT_PYTHON_SRC_ASYNC_MODULE_H_
#define RCKPT_PYTHON_SRC_ASYNC_MODULE_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

void RegisterAsync(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_ASYNC_MODULE_H_
