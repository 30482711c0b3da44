// Shared by the PyTorch and safetensors importers: tensor naming, the
// section table, RNG detection and the object classes the exporters know.
#ifndef RCKPT_SRC_CONVERT_IMPORT_COMMON_H_
#define RCKPT_SRC_CONVERT_IMPORT_COMMON_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/convert.h"
#include "rckpt/rng.h"
#include "rckpt/tree.h"

namespace rckpt::convert {

// Classes the importers produce for recognised values, which ExportPyTorch
// writes back with torch's allowlisted globals: collections.OrderedDict (an
// OrderedDict with attributes: fields {"items": map, "state": ...}),
// torch.Size, torch.device, torch.dtype, torch.layout, builtins.complex,
// builtins.bytearray. Any other object is inert.
bool IsKnownObjectClass(std::string_view class_path);

// The section of a tensor by its key path (docs/DESIGN.md §4 table; see
// docs/CONVERT.md). `plain_state_dict`: the root is a dict of tensors only.
std::string SectionForPath(const std::vector<std::string>& path, bool root_is_map,
                           bool plain_state_dict, const ImportOptions& options);

// Joins a key path with '.'; "tensor" for the empty path.
std::string JoinPath(const std::vector<std::string>& path);

// The path component of a map key is rckpt::KeyComponent (rckpt/tree.h).

// Whether a uint8 1-D tensor at `path` of `nbytes` is an RNG state, and of
// which kind and origin. nullopt: keep it a tensor. Appends a warning when a
// well-known RNG key holds bytes of no known layout.
struct RngGuess {
  RngKind kind;
  Device origin;
};
std::optional<RngGuess> DetectRng(const std::vector<std::string>& path, uint64_t nbytes,
                                  const ImportOptions& options,
                                  std::vector<std::string>* warnings);

// A name not yet used by a tensor or RNG record of `ck`: `name`, or
// `name~2`, `name~3`, ... (with a warning).
std::string UniqueName(const Checkpoint& ck, const std::string& name,
                       std::vector<std::string>* warnings);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_IMPORT_COMMON_H_
