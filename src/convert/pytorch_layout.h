// The record ExportPyTorch adds to a torch.save archive beside data.pkl,
// `<prefix>/.data/rckpt.json`: what a .rckpt holds and torch.load has no
// place for (sections and their roles, tensor names, RNG kinds and origins,
// the keys the export added to the tree, whether the tree was empty, user
// metadata). torch.load never reads it; ImportPyTorch reads it back, so a
// checkpoint exported to .pt and imported again is the same checkpoint.
//
// The record names the CRC-32 of the data.pkl it describes: an archive whose
// pickle was rewritten by another tool keeps a stale record, which the
// importer then ignores (with a warning) and imports the pickle as any
// other torch.save file.
#ifndef RCKPT_SRC_CONVERT_PYTORCH_LAYOUT_H_
#define RCKPT_SRC_CONVERT_PYTORCH_LAYOUT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/status.h"

namespace rckpt::convert {

// The record's name below the archive's top folder.
inline constexpr std::string_view kPyTorchLayoutRecord = ".data/rckpt.json";

struct PyTorchLayout {
  struct TensorMeta {
    std::string storage_key;  // record data/<key> holding its bytes
    std::string name;
    std::string section;
    Role role = Role::kData;
  };
  // A tensor the pickle holds as a NumPy array (numpy.ndarray in the tree),
  // by the key path of the array, as the importer names paths (JoinPath).
  struct ArrayMeta {
    std::string path;
    std::string name;
    std::string section;
    Role role = Role::kData;
    uint64_t index = 0;  // its place among all tensors, in checkpoint order
  };
  struct RngMeta {
    std::string name;
    RngKind kind = RngKind::kOpaque;
    Device origin;
    // Where the pickle holds it: a uint8 tensor over storage `storage_key`,
    // or (python records, written as random.getstate()'s tuple, and numpy
    // records written as NumPy's own state) the key path of its first
    // occurrence, as the importer names paths (JoinPath).
    std::optional<std::string> storage_key;
    std::string path;
  };

  uint32_t pickle_crc32 = 0;
  std::vector<SectionInfo> sections;      // the checkpoint's, in order
  std::vector<TensorMeta> tensors;        // in checkpoint order
  std::vector<ArrayMeta> arrays;          // in checkpoint order, placed by index
  std::vector<RngMeta> rng;               // in checkpoint order
  std::vector<std::string> added_keys;    // top-level keys the export added
  bool tree_was_null = false;
  std::map<std::string, std::string> metadata;
};

std::string EncodePyTorchLayout(const PyTorchLayout& layout);
// Corruption naming the field for anything malformed.
Result<PyTorchLayout> DecodePyTorchLayout(std::string_view json);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_PYTORCH_LAYOUT_H_
