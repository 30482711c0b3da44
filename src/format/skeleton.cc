#include "format/skeleton.h"

namespace rckpt {

Result<Checkpoint> CheckpointSkeleton(const Manifest& m) {
  Checkpoint ck;
  for (const auto& s : m.sections) RCKPT_RETURN_IF_ERROR(ck.AddSection(s.name, s.role));
  for (const auto& r : m.rng) RCKPT_RETURN_IF_ERROR(ck.AddRng(r.name, r.kind, r.bytes, r.origin));
  ck.Tree() = m.tree;
  ck.Metadata() = m.metadata;
  return ck;
}

}  // namespace rckpt
