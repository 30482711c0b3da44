// Building the manifest FlatBuffer (writer) and turning a verified one into a
// validated Manifest (reader).
#ifndef RCKPT_SRC_FORMAT_MANIFEST_H_
#define RCKPT_SRC_FORMAT_MANIFEST_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "format/meta.h"
#include "format/tree_codec.h"
#include "rckpt/checkpoint.h"

namespace rckpt {

struct ManifestInput {
  const Checkpoint& ck;
  const std::vector<ChunkMeta>& chunks;       // in file order
  // Per tensor, then per shard of every sharded tensor (SaveSourcesOf).
  const std::vector<uint64_t>& first_chunk;
  const FlatTree& tree;
  uint32_t alignment;
  uint64_t data_begin;
  uint64_t data_end;
  std::string writer;
  int64_t created_unix_ms;
};

std::vector<uint8_t> BuildManifest(const ManifestInput& in);

// The same from the reader's in-memory form: `m`'s tensors (with chunks and,
// for sharded tensors, shards), sections, RNG records and metadata; its
// version fields are ignored: the file declares 1.1 when a tensor is sharded,
// else 1.0 (FORMAT.md, revision history). A collective save's rank 0 builds
// its manifest this way from the metadata gathered from every rank.
std::vector<uint8_t> BuildManifestFromMeta(const Manifest& m, const FlatTree& tree);

// A sharded tensor's origin as a whole: the device of its lowest rank's
// shard (where a single-process load puts it as stored).
Device LowestRankOrigin(const std::vector<ShardMeta>& shards);

// The format version a file holding `m`'s tensors declares.
uint32_t FormatMinorFor(const std::vector<TensorMeta>& tensors);

// Limits enforced while reading (documented in FORMAT.md).
inline constexpr uint64_t kMaxManifestBytes = (1ull << 31) - 2;  // below FlatBuffers limit
inline constexpr size_t kMaxNameBytes = 1 << 16;
inline constexpr size_t kMaxRank = 64;
inline constexpr uint64_t kMaxChunkRawBytes = 1ull << 30;
inline constexpr uint64_t kMaxZstdRatio = 32768;

struct FileBounds {
  uint64_t file_size = 0;
  uint64_t data_begin = 0;  // where chunks may start
  uint64_t data_end = 0;    // where chunks must end (footer's data_end)
  uint32_t alignment = 0;   // from the header
};

// Why `name` cannot name a section, tensor or RNG record in a file (empty,
// longer than kMaxNameBytes, not UTF-8), or an empty string when it can.
// Shared by the writer (so a save never produces a file the reader would
// refuse) and the reader.
std::string NameProblem(std::string_view name);

// What ParseManifest requires of sharded tensors: a file's shards tile each
// tensor's shape; one rank's part of a collective save (distributed.h) holds
// only that rank's shards, which are checked for everything but that.
enum class ShardCoverage { kWhole, kPart };

// Runs the FlatBuffers verifier, then the semantic validator, and converts.
// Corruption names the record, the field, the expected and actual values.
Result<Manifest> ParseManifest(std::span<const uint8_t> bytes, const FileBounds& bounds,
                               ShardCoverage coverage = ShardCoverage::kWhole);

}  // namespace rckpt

#endif  // RCKPT_SRC_FORMAT_MANIFEST_H_
