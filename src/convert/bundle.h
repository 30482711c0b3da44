// Several checkpoints kept in one (the files of a training framework's
// checkpoint folder, rckpt.hf), and each taken out again as it was.
//
// A bundle's tree is a map {key: part's tree, ...}; each part's tensors and
// RNG records are named "<key>.<their name>" (the references in its tree
// renamed with them), its tensors sit in the section the part names, and
// its metadata is kept in the bundle's metadata under "rckpt.bundle.<key>"
// (a JSON object), so that UnbundlePart gives the part back with its names,
// references and metadata.
#ifndef RCKPT_SRC_CONVERT_BUNDLE_H_
#define RCKPT_SRC_CONVERT_BUNDLE_H_

#include <string>
#include <string_view>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/status.h"

namespace rckpt::convert {

inline constexpr std::string_view kBundleMetadataPrefix = "rckpt.bundle.";

struct BundlePart {
  std::string key;      // non-empty, no '.': the top-level key of the tree
  std::string section;  // where its tensors go; its role is the section's default
  Checkpoint checkpoint;
};

// Adds `part` to `bundle` (whose tree must be null or a map).
// InvalidArgument for a key that is empty, holds a '.', or is taken, and
// for a name the bundle already has; on failure `bundle` is unchanged.
Status AddBundlePart(Checkpoint* bundle, BundlePart part);

// The part stored under `key`: its tree, its tensors (in their bundle
// section and role, with their origins) and RNG records with the "<key>."
// prefix taken off, and its metadata. NotFound when the tree has no such
// key; Corruption when the bundle's record of its metadata is damaged.
Result<Checkpoint> UnbundlePart(const Checkpoint& bundle, const std::string& key);

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_BUNDLE_H_
