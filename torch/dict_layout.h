// How the Python package lays a dict of tensors (a state_dict) out in a
// checkpoint: the section's entry of the state tree is the dict, its tensors
// are TensorRefs named by key path ("model.fc1.weight"). No libtorch here.
#ifndef RCKPT_TORCH_DICT_LAYOUT_H_
#define RCKPT_TORCH_DICT_LAYOUT_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rckpt/status.h"
#include "rckpt/tree.h"

namespace rckpt::libtorch {

// A map key as a component of a tensor name is rckpt::KeyComponent
// (rckpt/tree.h), as Python's rckpt and the importers name tensors.

// The name Python's rckpt gives the tensor at `key` of section `section`.
std::string TensorName(std::string_view section, std::string_view key);

// The dict of one section, flattened: nested dicts (and the OrderedDict
// objects Python writes for state_dicts) have their keys joined with ".".
struct SectionDict {
  std::vector<std::pair<std::string, std::string>> tensors;  // key, tensor name
  std::vector<std::string> others;  // keys whose value is not a tensor
};

// Reads section `section` of `tree` (a checkpoint's state tree). A tree
// without the section (a checkpoint built without one) gives the tensors
// named in `section_tensors`, keyed by their names less "<section>.".
// NotFound when there is neither; InvalidArgument when the section's entry
// is not a dict (naming what it is).
Result<SectionDict> ReadSectionDict(const Value& tree, std::string_view section,
                                    std::span<const std::string> section_tensors);

}  // namespace rckpt::libtorch

#endif  // RCKPT_TORCH_DICT_LAYOUT_H_
