// What the two protocols of the collective save (distributed/save.cc) share:
// the checks before anything is written, the first step's handshake, each
// rank's share and part of the manifest, rank 0's merge of the parts, and
// the local spill file of compressed chunks. The protocols themselves:
// save_file.cc (a temporary every rank writes its extent of, renamed over
// the path) and save_object.cc (one multipart upload the ranks share).
#ifndef RCKPT_SRC_DISTRIBUTED_SAVE_STEPS_H_
#define RCKPT_SRC_DISTRIBUTED_SAVE_STEPS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/shared_file.h"
#include "engine/encode.h"
#include "format/tree_codec.h"
#include "rckpt/distributed.h"
#include "rckpt/file.h"

namespace rckpt::collective_save {

// What this rank writes: its whole tensors (those no lower rank also
// holds) and its shard blocks.
struct LocalPlan {
  std::vector<const TensorEntry*> whole;
  std::vector<SaveSource> sources;  // whole tensors, then shard blocks
};

// The options, the path and this rank's shard blocks checked before
// anything is written (this rank's outcome, agreed on by Introduce).
Status CheckBeforeWriting(int rank, const std::string& path, const RankState& state,
                          const SaveOptions& o);

// The outcome of step 1, the same handshake in both protocols.
struct Introduction {
  LocalPlan plan;            // this rank's share
  SaveOptions options;       // the caller's, threads resolved for this rank
  std::vector<std::string> from_root;  // rank 0's protocol fields
};

// Step 1, collective: every rank sends its whole tensors' names, its host
// name and `fields` (the protocol's: rank 0's say what the ranks write to,
// the others' are as many, empty) with its outcome so far, `checked`;
// every rank learns its share (tensors a lower rank holds are that rank's)
// and rank 0's fields, or the agreed error. threads = 0 shares the CPUs
// among the ranks on this host.
Result<Introduction> Introduce(Communicator& comm, const RankState& state, const SaveOptions& o,
                               const Status& checked, const std::vector<std::string>& fields);

// This rank's part of the manifest: its tensors and shards with their
// chunks at their final offsets, its RNG records named by rank, its tree.
std::string PartManifest(int rank, const RankState& state, const LocalPlan& plan,
                         const EncodedRegion& region, const SaveOptions& o, uint64_t data_end,
                         const FlatTree& tree);

// PartManifest with this rank's tree encoded.
Result<std::string> PartManifestOf(int rank, const RankState& state, const LocalPlan& plan,
                                   const EncodedRegion& region, const SaveOptions& o,
                                   uint64_t data_end);

// Rank 0: every rank's part merged into the file's manifest.
Result<std::vector<uint8_t>> MergeParts(const std::vector<std::string>& parts,
                                        const RankState& state, const SaveOptions& o,
                                        uint64_t data_end);

// Fields of one message: each a 32-bit length and its bytes.
void PutField(std::string* out, std::string_view field);
// The fields of `message`, or nullopt when it is not `count` of them.
std::optional<std::vector<std::string_view>> Fields(std::string_view message, size_t count);
// The IoError of a message that does not parse.
Status Malformed();
// A failure `s` of the save to `path`, saying so (OK stays OK).
Status OfSaveTo(const std::string& path, const Status& s);

// Encodes `plan`'s chunks into the spill file `spill` in `fs`, laid out as
// this rank's region at `start` (the bytes before it are never read).
Status EncodeToSpill(FileSystem& fs, const LocalPlan& plan, const SaveOptions& o,
                     const std::string& spill, uint64_t start, EncodedRegion* region);

// Copies the bytes [from_offset, from_offset + size) of the file `from` in
// `fs` through one bounded buffer to `put(done, piece)`.
Status CopyFrom(FileSystem& fs, const std::string& from, uint64_t from_offset, uint64_t size,
                const std::function<Status(uint64_t, std::span<const std::byte>)>& put);

// Removes a spill file (none when `path` is empty) on every way out.
struct SpillRemover {
  FileSystem& fs;
  const std::string& path;
  ~SpillRemover();
};

// The protocols, after CheckBeforeWriting (`checked`, not agreed yet).
Status SaveToFile(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                  const RankState& state, const SaveOptions& o, const Status& checked);
Status SaveToObject(Communicator& comm, const std::string& path, const RankState& state,
                    const SaveOptions& o, const Status& checked);

}  // namespace rckpt::collective_save

#endif  // RCKPT_SRC_DISTRIBUTED_SAVE_STEPS_H_
