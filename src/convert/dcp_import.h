// Reading torch.distributed.checkpoint (DCP) directories: the allow-list of
// globals a DCP .metadata pickle may name, and its parsed form. ImportDcp
// (rckpt/convert.h) builds a Checkpoint from them.
#ifndef RCKPT_SRC_CONVERT_DCP_IMPORT_H_
#define RCKPT_SRC_CONVERT_DCP_IMPORT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "rckpt/convert.h"
#include "rckpt/dtype.h"
#include "rckpt/status.h"
#include "rckpt/tensor.h"

namespace rckpt::convert {

// DIR/.metadata.
std::string DcpMetadataPath(const std::string& dir);

// The refusal of DCP as an output format (WriteCheckpointAs, Convert).
extern const char kDcpIsReadOnly[];

// The globals .metadata may name: DCP's metadata dataclasses, torch.Size,
// torch dtypes, the strided layout, memory formats, pathlib paths (DCP
// records the checkpoint id as one), OrderedDict and builtins.getattr (only
// as getattr(<allowed enum>, "MEMBER")). Nothing else.
const std::set<std::string>& DcpAllowedGlobals();

// One piece of stored bytes: [offset, offset + length) of DIR/relative_path.
struct DcpStorage {
  std::string relative_path;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<std::string> transforms;  // DCP stream extensions, outermost first
};

struct DcpChunk {
  Shape offsets;
  Shape sizes;
  DcpStorage storage;
};

// A key path component: a dict key (str) or a list index (int).
using DcpPathComponent = std::variant<std::string, int64_t>;

struct DcpItem {
  std::string fqn;
  std::vector<DcpPathComponent> path;  // planner_data's, or {fqn}
  bool is_tensor = false;
  DType dtype = DType::kF32;  // tensors
  Shape shape;                // tensors
  std::vector<DcpChunk> chunks;  // tensors: in .metadata's order
  DcpStorage bytes;              // non-tensor values (BYTE_IO)
};

struct DcpMetadata {
  std::vector<DcpItem> items;  // in state_dict_metadata's order
  std::string version;         // empty when absent
  std::vector<std::string> warnings;
};

// Parses the bytes of a .metadata file. Unsupported for a global off the
// allow-list (named; nothing imported or executed) and for dtypes rckpt
// cannot hold; Corruption naming the field for anything malformed (a missing
// storage entry of a chunk included).
Result<DcpMetadata> ParseDcpMetadata(std::span<const std::byte> bytes,
                                     const PickleLimits& limits);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_DCP_IMPORT_H_
