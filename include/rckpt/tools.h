// The operations behind the `rckpt` command-line tool, as library calls, so
// they can be tested and reused. The CLI only parses arguments and prints.
#ifndef RCKPT_TOOLS_H_
#define RCKPT_TOOLS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/io.h"
#include "rckpt/options.h"

namespace rckpt {

class FileSystem;

// The CLI's exit code for a status (docs/CLI.md): 0 OK, 2 InvalidArgument,
// 3 NotFound, 4 Corruption, 5 Unsupported, 6 DeviceUnavailable/DeviceError,
// 7 IoError, 8 OutOfMemory. (1 is diff's "different".)
int ExitCodeFor(const Status& status);

// A load error message with LoadOptions field names (model_device="auto",
// map_location, sections, ...) rewritten as the command-line flags that set
// them (--model-device auto, --map-location, --sections, ...), for programs
// whose users typed flags: the rckpt tool and rckpt-train-demo.
std::string InFlagTerms(std::string_view message);

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

struct InspectTensor {
  std::string name;
  std::string section;
  Role role = Role::kData;
  DType dtype = DType::kF32;
  Shape shape;
  Device device;            // origin device
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
// Unsupported. `fs` nullptr: the POSIX file system.
Result<InspectReport> InspectRckpt(const std::string& path, FileSystem* fs = nullptr);

// The report of a checkpoint already in memory (e.g. an imported .pt file):
// stored sizes equal raw sizes.
InspectReport InspectCheckpoint(const Checkpoint& ck, std::string path, std::string format);

// Human-readable table / JSON (docs/CLI.md, schema_version 1).
std::string RenderInspectText(const InspectReport& report);
std::string RenderInspectJson(const InspectReport& report);

// The state tree as JSON (docs/CLI.md "Tree JSON"): JSON scalars, strings,
// arrays and objects where they fit, tagged objects ({"$tuple": [...]},
// {"$tensor": name}, ...) where they do not.
std::string TreeToJson(const Value& tree);

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

// `rckpt plan` and `rckpt load` (docs/RELOCATION.md). The placements come
// from PlanLoad (plan) or from the loaded checkpoint (load).
// Text: one row per tensor and RNG record (kind, name, section, role, origin,
// target) and a summary of how many go to each device. JSON (schema_version
// 1): {"schema_version":1,"placements":[{"name","kind":"tensor"|"rng",
// "section" (null for RNG records),"role","origin","target"}]}.
std::string RenderPlanText(const std::vector<Placement>& placements);
std::string RenderPlanJson(const std::vector<Placement>& placements);

struct LoadReport {
  std::string path;
  std::string runtime;  // DeviceRuntime::name() of the runtime used
  LoadStats stats;
  bool mapped = false;  // loaded with LoadOptions::map_file
  std::vector<Placement> placements;
};

// Loads `path` for real with `options` (its stats pointer is replaced) and
// records where every tensor and RNG record went; the loaded checkpoint is
// released before returning. Errors: those of Load.
Result<LoadReport> LoadForReport(const std::string& path, LoadOptions options);

// Text: bytes, seconds, rate (rckpt/human_bytes.h units), staging high-water of capacity, then the
// placement table. JSON (schema_version 1): {"schema_version":1,"path",
// "runtime","bytes_read","bytes_restored","seconds","gb_per_s",
// "staging_high_water","staging_capacity","mapped","placements":[...as
// plan...]}.
std::string RenderLoadText(const LoadReport& report);
std::string RenderLoadJson(const LoadReport& report);

}  // namespace rckpt

#endif  // RCKPT_TOOLS_H_
