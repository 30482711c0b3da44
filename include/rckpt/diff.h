// Comparing two checkpoints by what a restart depends on.
//
// Three modes (DiffMode). Strict compares everything a Checkpoint holds:
// tensor names, sections (names and roles), tensor sections and roles,
// dtypes, shapes and bytes (bit for bit, so NaN payloads and -0.0 count,
// unless tolerances are given for floating-point tensors), origin devices
// (unless ignore_devices), RNG records (kind, bytes, origin device), the
// state tree (structure, container types, key order and values) and all
// metadata. State (the default) compares the state both sides' files record
// (DiffOptions::a_records / b_records, from ImportReport::recorded) and
// lists what it left out (DiffReport::not_compared): sections and roles
// that a plain .pt derives from key names, RNG kinds that a plain file
// leaves to guessing (an RNG record then matches a uint8 tensor of the same
// name and bytes), a tree a plain .safetensors does not have, key order a
// DCP directory does not keep. It also compares the state inside the
// containers that hold it: an OrderedDict as its items (torch's _metadata
// attribute left out), a collective file's tree as its "common" part, user
// metadata without the "rckpt." keys that describe how a file was written.
// Tensors compares tensor names, dtypes, shapes and bytes only.
//
// Ignored in every mode: how bytes are stored (codec, level, filter,
// chunking, alignment), the writer's identity and the creation time. Two
// saves of the same state are identical whatever their encoding.
#ifndef RCKPT_DIFF_H_
#define RCKPT_DIFF_H_

#include <string>
#include <string_view>
#include <vector>

#include "rckpt/checkpoint.h"

namespace rckpt {

enum class DiffMode {
  kState,    // what both files record (the default)
  kStrict,   // everything
  kTensors,  // tensor names, dtypes, shapes and bytes
};
std::string_view DiffModeName(DiffMode mode);  // "state" "strict" "tensors"

// What each file records (Recorded) is in rckpt/checkpoint.h.
struct DiffOptions {
  DiffMode mode = DiffMode::kState;
  Recorded a_records;  // what A's file records (kState only)
  Recorded b_records;
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

// A part of the checkpoints the comparison left out, and why.
struct NotCompared {
  std::string what;  // "sections and roles", "RNG kinds", "state tree", ...
  std::string why;   // "B (safetensors) does not record them", ...
};

struct DiffReport {
  DiffMode mode = DiffMode::kState;
  bool identical = true;
  size_t count = 0;                      // all differences found
  std::vector<Difference> differences;   // the first max_differences
  std::vector<NotCompared> not_compared;
};

// Compares `a` and `b`. Tensors must be in host memory (InvalidArgument
// otherwise); InvalidArgument for negative tolerances.
Result<DiffReport> DiffCheckpoints(const Checkpoint& a, const Checkpoint& b,
                                   const DiffOptions& options = {});

}  // namespace rckpt

#endif  // RCKPT_DIFF_H_
