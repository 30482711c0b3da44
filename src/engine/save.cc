// Save: validate, then one sequential pass (header, chunks, manifest,
// footer) into an atomically replaced file (io/atomic_write.h).

#include <chrono>
#include <string>
#include <vector>

#include "engine/encode.h"
#include "engine/save_options.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/tree_codec.h"
#include "format/writer.h"
#include "io/atomic_write.h"
#include "rckpt/file.h"
#include "rckpt/io.h"

namespace rckpt {
namespace {

// Every name must be one the reader accepts: a save never writes a file that
// cannot be loaded. Checked before the file is created.
Status CheckNamesForSave(const Checkpoint& ck) {
  auto check = [](const char* kind, const std::string& name) {
    const std::string problem = NameProblem(name);
    if (problem.empty()) return Status::Ok();
    std::string shown = name.substr(0, 80);
    return Status::InvalidArgument(std::string(kind) + " name '" + shown +
                                   (name.size() > 80 ? "...'" : "'") + " " + problem);
  };
  for (const SectionInfo& s : ck.sections()) RCKPT_RETURN_IF_ERROR(check("section", s.name));
  for (const TensorEntry& t : ck.tensors()) RCKPT_RETURN_IF_ERROR(check("tensor", t.name));
  for (const ShardedTensorEntry& t : ck.sharded_tensors()) {
    RCKPT_RETURN_IF_ERROR(check("tensor", t.name));
  }
  for (const RngRecord& r : ck.rng()) RCKPT_RETURN_IF_ERROR(check("RNG record", r.name));
  return Status::Ok();
}

// About the size of the file (tensor and RNG bytes, as stored raw, and the
// framing): what an object store sizes its upload's parts from.
uint64_t ExpectedFileSize(const Checkpoint& ck) {
  uint64_t n = 1ull << 20;  // header, footer, a manifest and its padding
  for (const TensorEntry& t : ck.tensors()) n += t.tensor.nbytes() + 4096;
  for (const ShardedTensorEntry& t : ck.sharded_tensors()) {
    for (const TensorShard& s : t.shards) n += s.block.nbytes() + 4096;
  }
  for (const RngRecord& r : ck.rng()) n += r.bytes.size();
  return n;
}

// A single-process save: header, every tensor's (and shard's) chunks,
// manifest, footer.
Status WriteCheckpoint(const Checkpoint& ck, const SaveOptions& o, WritableFile& file) {
  RCKPT_ASSIGN_OR_RETURN(FlatTree tree, EncodeTree(ck.Tree()));
  const uint16_t version_minor =
      ck.sharded_tensors().empty() ? kFormatMinorUnsharded : kFormatMinorSharded;
  RCKPT_RETURN_IF_ERROR(WriteHeader(file, o.alignment, version_minor));
  std::vector<SaveSource> sources = SaveSourcesOf(ck);
  EncodedRegion region;
  RCKPT_RETURN_IF_ERROR(EncodeRegion(sources, o, file, kHeaderSize, &region));
  ManifestInput in{ck, region.chunks, region.first_chunk, tree, o.alignment, kHeaderSize,
                   region.end,
                   o.writer.empty() ? std::string("rckpt ") + RCKPT_VERSION_STRING : o.writer,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count()};
  return AppendManifestAndFooter(file, region.end, BuildManifest(in), version_minor);
}

}  // namespace

Status Save(const std::string& path, const Checkpoint& ck, const SaveOptions& options) {
  if (!options.caller_stream && ck.caller_stream()) {
    // The checkpoint's device tensors come with their producer's stream.
    SaveOptions ordered = options;
    ordered.caller_stream = ck.caller_stream();
    return Save(path, ck, ordered);
  }
  RCKPT_RETURN_IF_ERROR(ValidateSaveOptions(options));
  if (path.empty()) return Status::InvalidArgument("save path is empty");
  RCKPT_RETURN_IF_ERROR(CheckNamesForSave(ck));
  FileSystem& fs = options.fs ? *options.fs : DefaultFileSystem();
  return WriteFileAtomically(
             fs, path, [&](WritableFile& file) { return WriteCheckpoint(ck, options, file); },
             ExpectedFileSize(ck), options.replace)
      .WithContext("save to '" + path + "'");
}

}  // namespace rckpt
