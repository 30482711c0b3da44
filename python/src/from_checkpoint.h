// rckpt::Checkpoint -> Python, for load: the inverse of to_checkpoint.h.
#ifndef RCKPT_PYTHON_SRC_FROM_CHECKPOINT_H_
#define RCKPT_PYTHON_SRC_FROM_CHECKPOINT_H_

#include <nanobind/nanobind.h>

#include <memory>
#include <vector>

#include "rckpt/checkpoint.h"

namespace rckpt::python {

namespace nb = nanobind;

// Every tensor of `entries` (a checkpoint's, or the blocks of a
// distributed load) as a torch.Tensor, handed over without a copy, with
// where it was restored to and its recorded origin (name -> "cuda:1"), all
// keyed by tensor name in file order. `keep` is held by each tensor (the
// runtime that owns device memory); `device_is_host`: device tensors live in
// host memory (the emulated runtime) and come back as CPU tensors.
// CUDA tensors `made` allocated (torch's own) are handed back as they are.
struct TorchTensors {
  nb::dict tensors;
  nb::dict placement;
  nb::dict origin;
};
class TorchDeviceAllocator;
TorchTensors TensorsToTorch(const std::vector<TensorEntry>& entries, std::shared_ptr<void> keep,
                            bool device_is_host, TorchDeviceAllocator* made = nullptr);

// The state tree as Python objects; tensor references resolve through
// `tensors` (None for a tensor that was not loaded), RNG references to the
// form their generator's API takes (torch states as uint8 tensors, Python's
// random as random.getstate()'s tuple, NumPy's as get_state()'s tuple or a
// bit generator's .state dict, others as bytes).
nb::object TreeToPython(const Checkpoint& ck, nb::dict tensors);

// Any tree (a distributed load's common or rank trees) as TreeToPython
// converts ck.Tree(); RNG references resolve through `ck`'s records.
nb::object TreeToPython(const Value& tree, const Checkpoint& ck, nb::dict tensors);

// An RNG record's bytes as random.getstate() returns them, and back;
// ValueError for bytes or a tuple of another shape.
nb::object PythonRngTuple(std::span<const std::byte> bytes);
nb::bytes PythonRngBytes(nb::handle state);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_FROM_CHECKPOINT_H_
