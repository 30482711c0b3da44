#include "format/padding.h"

#include "util/hex.h"

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
  // Gaps are read in groups of up to kGroup bytes with one ReadRanges each,
  // so an object store fetches them in parallel rather than one by one.
  constexpr uint64_t kPiece = 1ull << 20;
  constexpr uint64_t kGroup = 16ull << 20;
  std::vector<Gap> pieces;
  for (const Gap& g : PaddingGaps(manifest)) {
    for (uint64_t at = g.begin; at < g.end; at += kPiece) {
      pieces.push_back({at, std::min(g.end, at + kPiece)});
    }
  }
  std::vector<std::byte> buf;
  std::vector<ReadRange> ranges;
  for (size_t first = 0; first < pieces.size();) {
    size_t last = first;
    uint64_t bytes = 0;
    while (last < pieces.size()) {
      const uint64_t n = pieces[last].end - pieces[last].begin;
      if (last > first && bytes + n > kGroup) break;
      bytes += n;
      ++last;
    }
    buf.resize(bytes);
    ranges.clear();
    uint64_t at = 0;
    for (size_t k = first; k < last; ++k) {
      const uint64_t n = pieces[k].end - pieces[k].begin;
      ranges.push_back({pieces[k].begin, std::span<std::byte>(buf).subspan(at, n)});
      at += n;
    }
    RCKPT_RETURN_IF_ERROR(file.ReadRanges(ranges));
    for (const ReadRange& r : ranges) {
      auto bad =
          std::find_if(r.dst.begin(), r.dst.end(), [](std::byte b) { return b != std::byte{0}; });
      if (bad == r.dst.end()) continue;
      const uint64_t offset = r.offset + static_cast<uint64_t>(bad - r.dst.begin());
      // The gap it lies in, for the message.
      Gap gap{r.offset, r.offset + r.dst.size()};
      for (const Gap& g : PaddingGaps(manifest)) {
        if (g.begin <= offset && offset < g.end) gap = g;
      }
      const std::string value = "0x" + HexDigits(static_cast<unsigned>(*bad), 2);
      return Status::Corruption(
          "'" + path + "': padding byte at offset " + std::to_string(offset) + " is " + value +
          ", expected 0 (padding [" + std::to_string(gap.begin) + ", " + std::to_string(gap.end) +
          ") lies between chunks and before the manifest, and must be zero)");
    }
    first = last;
  }
  return Status::Ok();
}

}  // namespace rckpt
