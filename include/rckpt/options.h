// Options of Save and of every kind of load, including the relocation policy.
#ifndef RCKPT_OPTIONS_H_
#define RCKPT_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/device.h"

namespace rckpt {

class DeviceRuntime;
class FileSystem;

// Stored in files; frozen.
enum class Codec : uint8_t { kNone = 0, kZstd = 1 };
std::string_view CodecName(Codec codec);  // "none" "zstd"

// Byte-shuffle filter: groups the i-th byte of every element together before
// compression, which helps zstd on floating-point data. kAuto shuffles
// floating-point tensors compressed with zstd.
enum class Shuffle : uint8_t { kAuto = 0, kOn = 1, kOff = 2 };

// Called with (bytes done, bytes total) as work proceeds, from the calling
// thread. Returning false cancels: the operation stops and returns IoError
// "cancelled"; a cancelled save leaves the previous file at the path intact.
using ProgressCallback = std::function<bool(uint64_t done, uint64_t total)>;

struct SaveOptions {
  // Raw by default: measured faster to save, load and restore than zstd for
  // files ~1.2x larger (docs/PERFORMANCE.md); zstd pays on slow storage.
  Codec codec = Codec::kNone;
  int level = 1;                        // zstd level (1..19; negative = fast)
  uint64_t chunk_bytes = 4ull << 20;    // tensors are split into chunks of this size
  Shuffle shuffle = Shuffle::kAuto;
  uint32_t alignment = 4096;            // power of two, >= 64
  int threads = 0;                      // 0: all cores
  ProgressCallback progress;
  // Runtime used to read device tensors (nullptr: DefaultRuntime()). Device
  // tensors stream device-to-host through a pinned ring of staging_bytes.
  DeviceRuntime* runtime = nullptr;
  uint64_t staging_bytes = 64ull << 20;
  FileSystem* fs = nullptr;             // nullptr: the POSIX file system
  // Recorded as the writer identity; default "rckpt <version>".
  std::string writer;
};

// torch.load's map_location, made explicit: nothing, one device, an exact tag
// map (origin -> target), or a callback (nullopt = as stored).
class MapLocation {
 public:
  using Callback = std::function<std::optional<Device>(const TensorInfo&)>;

  MapLocation() = default;
  static MapLocation To(Device d);
  static MapLocation Map(std::map<Device, Device> tags);
  static MapLocation Fn(Callback cb);
  // Parses the CLI syntax: a device ("cpu", "cuda:0") or a tag map
  // ("cuda:1=cuda:0,cuda:2=cuda:0"). InvalidArgument otherwise.
  static Result<MapLocation> Parse(std::string_view spec);

  bool is_set() const { return kind_ != Kind::kNone; }
  // Target for a tensor under this map alone (origin when not mapped).
  Device Apply(const TensorInfo& info) const;
  std::string ToString() const;

 private:
  enum class Kind { kNone, kDevice, kMap, kCallback };
  Kind kind_ = Kind::kNone;
  Device device_;
  std::map<Device, Device> tags_;
  Callback callback_;
};

struct LoadStats {
  uint64_t bytes_read = 0;         // file bytes read
  uint64_t bytes_restored = 0;     // raw tensor + RNG bytes produced
  double seconds = 0;
  uint64_t staging_high_water = 0; // peak pinned staging bytes in use
  uint64_t staging_capacity = 0;   // the ring's size
};

struct LoadOptions {
  MapLocation map_location;
  std::optional<DeviceSpec> model_device;
  // Only these sections (empty: all) / never these sections. Tensors of
  // sections not loaded are not read at all, and the state tree keeps only
  // the loaded sections' entries (its top-level map, or a collective file's
  // "common" map; keys that are not strings stay).
  std::vector<std::string> sections;
  std::vector<std::string> skip_sections;
  bool verify_checksums = true;
  // Map the file instead of reading it (the default). Chunks are decoded
  // straight from the page cache, and Load / ReadTensors hand back
  // uncompressed host tensors that are not copied at all: they point into a
  // private (copy-on-write) mapping of the file, kept alive by the tensors.
  // Writing to such a tensor copies the touched pages; the file never
  // changes. A restarting process pays no fresh memory for them, which is
  // what a copying load spends most of its time on (docs/PERFORMANCE.md,
  // "Whole process"). The file must not be truncated or rewritten in place
  // while such tensors live: touching bytes a truncation removed kills the
  // process with SIGBUS, and bytes rewritten in place show through pages not
  // yet written by this process. rckpt's own saves replace files by rename
  // and are safe; `cp` or `torch.save` over the same path are not. Set false
  // (CLI: --no-map-file) for a copying load that owns all its memory, e.g.
  // when other programs may rewrite the file. Files that cannot be mapped
  // are read as usual.
  bool map_file = true;
  int threads = 0;                      // 0: all cores
  uint64_t staging_bytes = 64ull << 20; // pinned ring for device-bound data
  DeviceRuntime* runtime = nullptr;     // nullptr: DefaultRuntime()
  FileSystem* fs = nullptr;             // nullptr: the POSIX file system
  ProgressCallback progress;
  LoadStats* stats = nullptr;           // filled when not null
};

}  // namespace rckpt

#endif  // RCKPT_OPTIONS_H_
