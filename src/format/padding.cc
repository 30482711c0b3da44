#include "format/padding.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace rckpt {
namespace {

struct Gap {
  uint64_t begin, end;
};

// [begin, end) ranges of the file that must be zero, in file order. The
// manifest has been validated: extents lie inside the data region and do
// not overlap.
std::vector<Gap> PaddingGaps(const Manifest& m) {
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  for (const TensorMeta& t : m.tensors) {
    for (const ChunkMeta& c : t.chunks) extents.emplace_back(c.offset, c.offset + c.stored_size);
  }
  std::sort(extents.begin(), extents.end());
  std::vector<Gap> gaps;
  uint64_t cursor = m.data_begin;
  for (const auto& [begin, end] : extents) {
    if (begin > cursor) gaps.push_back({cursor, begin});
    cursor = std::max(cursor, end);
  }
  // The data region's tail, then the padding to the 8-aligned manifest.
  if (m.manifest_offset > cursor) gaps.push_back({cursor, m.manifest_offset});
  return gaps;
}

}  // namespace

Status VerifyZeroPadding(const RandomAccessFile& file, const Manifest& manifest,
                         const std::string& path) {
  constexpr uint64_t kPiece = 1ull << 20;
  std::vector<std::byte> buf;
  for (const Gap& g : PaddingGaps(manifest)) {
    for (uint64_t at = g.begin; at < g.end; at += kPiece) {
      const uint64_t n = std::min(kPiece, g.end - at);
      buf.resize(n);
      RCKPT_RETURN_IF_ERROR(file.ReadAt(at, buf));
      auto bad = std::find_if(buf.begin(), buf.end(), [](std::byte b) { return b != std::byte{0}; });
      if (bad == buf.end()) continue;
      char value[8];
      std::snprintf(value, sizeof value, "0x%02x", static_cast<unsigned>(*bad));
      return Status::Corruption(
          "'" + path + "': padding byte at offset " + std::to_string(at + (bad - buf.begin())) +
          " is " + value + ", expected 0 (padding [" + std::to_string(g.begin) + ", " +
          std::to_string(g.end) + ") lies between chunks and before the manifest, and must be zero)");
    }
  }
  return Status::Ok();
}

}  // namespace rckpt
