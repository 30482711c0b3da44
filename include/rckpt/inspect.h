// What a .rckpt file holds and whether it is sound, as plain values: the
// structure (sections, tensors with their headers and storage, shards, RNG
// records, metadata, the state tree) without reading tensor bytes, and a
// full verification of every chunk. `rckpt inspect` and `rckpt verify`
// render these reports (docs/CLI.md). Functions here are thread-safe: each
// call opens the file on its own.
#ifndef RCKPT_INSPECT_H_
#define RCKPT_INSPECT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

class FileSystem;

// One block of a sharded tensor (format 1.1).
struct InspectShard {
  int32_t rank = 0;
  Device device;            // origin device of the block
  Shape offsets;
  Shape sizes;
  uint64_t nbytes = 0;      // raw
  uint64_t stored_nbytes = 0;
  uint64_t chunks = 0;
};

// A tensor's header (TensorInfo: name, section, role, dtype, shape, origin)
// and how it is stored.
struct InspectTensor : TensorInfo {
  uint64_t nbytes = 0;      // raw
  uint64_t stored_nbytes = 0;
  std::string codec;        // "none", "zstd", "zstd+shuffle", "mixed"
  uint64_t chunks = 0;
  std::vector<InspectShard> shards;  // empty unless sharded
};

struct InspectRng {
  std::string name;
  RngKind kind = RngKind::kOpaque;
  Device device;
  uint64_t nbytes = 0;
};

struct InspectReport {
  std::string path;
  std::string format;           // "rckpt", "pytorch", "safetensors"
  std::string format_version;   // "1.0" for rckpt
  std::string writer;
  int64_t created_unix_ms = 0;
  uint64_t file_size = 0;
  std::map<std::string, std::string> metadata;
  std::vector<SectionInfo> sections;
  std::vector<InspectTensor> tensors;
  std::vector<InspectRng> rng;
  Value tree;
  std::vector<std::string> warnings;  // e.g. inert classes found by an importer
};

// Reads the structure of an .rckpt file (no tensor bytes). Errors as
// FileReader: NotFound, InvalidArgument (a directory), Corruption,
// Unsupported. `fs` nullptr: DefaultFileSystem() (file.h).
Result<InspectReport> InspectRckpt(const std::string& path, FileSystem* fs = nullptr);

// The report of a checkpoint already in memory (e.g. an imported .pt file):
// stored sizes equal raw sizes.
InspectReport InspectCheckpoint(const Checkpoint& ck, std::string path, std::string format);

struct VerifyReport {
  uint64_t tensors = 0;
  uint64_t chunks = 0;
  uint64_t stored_bytes = 0;
  uint64_t raw_bytes = 0;
  uint64_t rng_records = 0;
};

// Checks the structure and every chunk's checksum and decodability. OK only
// when the whole file is sound; otherwise the first problem (Corruption
// naming tensor, chunk, offset and what failed).
Status VerifyRckpt(const std::string& path, VerifyReport* report = nullptr,
                   const ProgressCallback& progress = {}, FileSystem* fs = nullptr);

}  // namespace rckpt

#endif  // RCKPT_INSPECT_H_
