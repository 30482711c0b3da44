// Python state -> rckpt::Checkpoint, for save.
//
// The state is a dict whose top-level keys are sections; its values map onto
// the state tree (docs/PYTHON.md, type mapping): dict, list, tuple, set, int
// (any size), float, bool, None, str, bytes, torch.Size, torch.dtype,
// torch.device, rckpt.InertObject, and torch tensors, which become tensors
// named by their key path as the PyTorch importer names them. Anything else
// raises TypeError naming its key path, before anything is written.
//
// For a collective save (rckpt.distributed) the state may also hold shards:
// one rank's block of a larger tensor.
#ifndef RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_
#define RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"

namespace rckpt::python {

namespace nb = nanobind;

// One rank's block of a tensor, met in the state as an object of the shard
// type (rckpt.distributed.Shard: attributes block, offsets, shape). It is
// named and referenced in the tree as a whole tensor at its key path would
// be, but is not added to the checkpoint.
struct ShardLeaf {
  std::string section;
  std::string name;
  Shape shape;    // of the whole tensor
  Shape offsets;  // where `block` starts in it
  TensorView block;
  std::optional<Device> origin;  // from `origin`, for a block in host memory
};

struct ShardLeaves {
  nb::handle type;  // the shard type
  std::vector<ShardLeaf> leaves;
};

// Fills `ck` from `state`. Tensors borrow the caller's memory; tensors that
// had to be made contiguous are appended to `keep_alive`, which must outlive
// the save. `origin`: None, a device string (recorded as the origin of every
// model-role CPU tensor) or a dict section -> device string (every CPU tensor
// of those sections). `shards`: where the state's shards go (nullptr: a
// shard is a value that cannot be stored). A name that two keys map to is
// ValueError when one of them is a shard (its name must be the same on
// every rank). `cuda_tensors`, when given, receives every CUDA tensor of the
// state (the caller's objects, a shard's block included) once, so that an
// asynchronous save can record them for its copies. Throws nb::type_error /
// nb::value_error / StatusError.
void BuildCheckpoint(nb::handle state, nb::handle origin, Checkpoint* ck,
                     std::vector<nb::object>* keep_alive, ShardLeaves* shards = nullptr,
                     std::vector<nb::object>* cuda_tensors = nullptr);

// A tree of values without tensors (a rank's own state in a collective
// save), converted as a section of `state` is. TypeError naming the key
// path, which starts with `what`, for a tensor or anything that cannot be
// stored.
Value PlainTree(nb::handle tree, const std::string& what);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_TO_CHECKPOINT_H_
