// Python state -> rckpt::Checkpoint, for save.
//
// The state is a dict whose top-level keys are sections; its values map onto
// the state tree (docs/PYTHON.md, type mapping): dict, list, tuple, set, int
// (any size), float, bool, None, str, bytes, torch.Size, torch.dtype,
// torch.device, rckpt.InertObject, and torch tensors, which become tensors
// named by their key path as the PyTorch importer names them. Anything else
// raises TypeError naming its key path, before anything is written.
#ifndef RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_
#define RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_

#include <nanobind/nanobind.h>

#include <vector>

#include "rckpt/checkpoint.h"

namespace rckpt::python {

namespace nb = nanobind;

// Fills `ck` from `state`. Tensors borrow the caller's memory; tensors that
// had to be made contiguous are appended to `keep_alive`, which must outlive
// the save. `origin`: None, a device string (recorded as the origin of every
// model-role CPU tensor) or a dict section -> device string (every CPU tensor
// of those sections). Throws nb::type_error / nb::value_error / StatusError.
void BuildCheckpoint(nb::handle state, nb::handle origin, Checkpoint* ck,
                     std::vector<nb::object>* keep_alive);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_
