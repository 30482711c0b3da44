// Comparing two checkpoints by what a restart depends on.
//
// Compared: tensor names, sections, roles, dtypes, shapes and bytes (bit for
// bit, so NaN payloads and -0.0 count, unless tolerances are given for
// floating-point tensors), origin devices (unless ignore_devices), RNG
// records (kind, bytes, origin device unless ignore_devices), the state tree
// (structure, order and values) and user metadata. Ignored: how bytes are
// stored (codec, level, filter, chunking, alignment), the writer's identity
// and the creation time. Two saves of the same state are identical whatever
// their encoding.
#ifndef RCKPT_DIFF_H_
#define RCKPT_DIFF_H_

#include <string>
#include <vector>

#include "rckpt/checkpoint.h"

namespace rckpt {

struct DiffOptions {
  // Floating-point tensor elements a, b match when |a - b| <= atol + rtol*|b|
  // (NaN matches NaN). Both 0 (the default): bit-for-bit comparison.
  double atol = 0;
  double rtol = 0;
  bool ignore_devices = false;
  size_t max_differences = 100;  // listed; counting continues
};

struct Difference {
  std::string kind;    // "tensor", "rng", "tree", "metadata", "section"
  std::string name;    // tensor / RNG name, tree path, metadata key
  std::string detail;  // what differs, with both values
};

struct DiffReport {
  bool identical = true;
  size_t count = 0;                      // all differences found
  std::vector<Difference> differences;   // the first max_differences
};

// Compares `a` and `b`. Tensors must be in host memory (InvalidArgument
// otherwise); InvalidArgument for negative tolerances.
Result<DiffReport> DiffCheckpoints(const Checkpoint& a, const Checkpoint& b,
                                   const DiffOptions& options = {});

}  // namespace rckpt

#endif  // RCKPT_DIFF_H_
