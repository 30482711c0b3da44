// What a collective save (rckpt/distributed.h) writes beyond what any
// .rckpt file holds: the number of ranks that saved it, as metadata, and a
// state tree of the form {"common": <the sections>, "ranks": [<rank 0's own
// tree>, ...]}. Single-process loads and the Python layer read it through
// these names (docs/DISTRIBUTED.md).
#ifndef RCKPT_SRC_FORMAT_COLLECTIVE_LAYOUT_H_
#define RCKPT_SRC_FORMAT_COLLECTIVE_LAYOUT_H_

#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "rckpt/tree.h"

namespace rckpt {

// The metadata key holding the number of ranks that saved the file.
inline constexpr std::string_view kWorldSizeKey = "rckpt.world_size";
inline constexpr std::string_view kCommonTreeKey = "common";
inline constexpr std::string_view kRanksTreeKey = "ranks";

// The world size a collective file records, or 0 for any other file (or a
// value that is not a positive number).
inline int64_t SavedWorldSize(const std::map<std::string, std::string>& metadata) {
  auto it = metadata.find(std::string(kWorldSizeKey));
  if (it == metadata.end()) return 0;
  int64_t n = 0;
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && end == v.data() + v.size() && n > 0 ? n : 0;
}

// The map of a file's tree that holds its sections by name: a collective
// file's "common" map, else the tree itself when it is a map; nullptr when
// the tree has no such map.
inline Value* SectionsOfTree(const std::map<std::string, std::string>& metadata, Value& tree) {
  if (!tree.is_map()) return nullptr;
  if (SavedWorldSize(metadata) > 0) {
    Value* common = tree.Find(kCommonTreeKey);
    if (common != nullptr && common->is_map()) return common;
  }
  return &tree;
}

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_COLLECTIVE_LAYOUT_H_
