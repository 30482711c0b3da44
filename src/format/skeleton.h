// The parts of a loaded checkpoint that are not tensors.
#ifndef RCKPT_SRC_FORMAT_SKELETON_H_
#define RCKPT_SRC_FORMAT_SKELETON_H_

#include "format/meta.h"
#include "rckpt/checkpoint.h"

namespace rckpt {

// A checkpoint holding every section, RNG record (validated), the tree and
// the metadata of `m`, and no tensors.
Result<Checkpoint> CheckpointSkeleton(const Manifest& m);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_SKELETON_H_
