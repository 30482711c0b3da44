// Options of Save and of every kind of load, including the relocation policy.
#ifndef RCKPT_OPTIONS_H_
#define RCKPT_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/device.h"
#include "rckpt/runtime.h"

namespace rckpt {

class FileSystem;

// CallerStream (runtime.h): the caller's stream on a device, which device work
// is ordered with.

// Device memory for the tensors a load hands back, from an allocator the
// caller chooses (the Python package passes torch's caching allocator, so
// freeing a loaded tensor never synchronises the device), and for the
// device un-shuffle's scratch (one uint8 tensor of a staging slot per device
// that gets byte-shuffled chunks, named "(device un-shuffle scratch)"). Without one, a load
// allocates with its runtime (DeviceRuntime::Allocate, freed through it when
// the last copy of the tensor goes: the CUDA runtime's cuMemFree synchronises
// the device).
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  struct Request {
    std::string_view name;  // the tensor's
    Device device;          // a CUDA device
    DType dtype = DType::kF32;
    Shape shape;            // the tensor's, or its block's in a distributed load
  };
  // Called once per load, on the calling thread, before any byte is read,
  // with every device tensor the load will return; then, on the same
  // thread, once per device whose chunks the device un-shuffles, for its
  // scratch (OutOfMemory there un-shuffles on the host instead). Appends one tensor per
  // request to `out`, in order, of its device, dtype and shape and owning its
  // memory (a Tensor::Adopt whose owner frees it). An error fails the load:
  // nothing has been read, and the tensors already made are released.
  virtual Status Allocate(std::span<const Request> requests, std::vector<Tensor>* out) = 0;
};

// Stored in files; frozen.
enum class Codec : uint8_t { kNone = 0, kZstd = 1 };
std::string_view CodecName(Codec codec);  // "none" "zstd"
// The codec CodecName names; InvalidArgument naming the choices otherwise.
Result<Codec> ParseCodec(std::string_view name);

// The zstd levels a save accepts (SaveOptions::level): negative levels are
// faster, higher ones smaller. A save with Codec::kZstd and a level outside
// them fails with InvalidArgument before the file is opened; with
// Codec::kNone the level is not used.
inline constexpr int kMinZstdLevel = -7;
inline constexpr int kMaxZstdLevel = 22;

// Byte-shuffle filter: groups the i-th byte of every element together before
// compression, which helps zstd on floating-point data. kAuto shuffles
// floating-point tensors compressed with zstd.
enum class Shuffle : uint8_t { kAuto = 0, kOn = 1, kOff = 2 };
std::string_view ShuffleName(Shuffle shuffle);  // "auto" "on" "off"
// The filter ShuffleName names; InvalidArgument naming the choices otherwise.
Result<Shuffle> ParseShuffle(std::string_view name);

// Called with (bytes done, bytes total) as work proceeds, from the calling
// thread. Returning false cancels: the operation stops and returns IoError
// "cancelled"; a cancelled save leaves the previous file at the path intact.
using ProgressCallback = std::function<bool(uint64_t done, uint64_t total)>;

struct SaveOptions {
  // Raw by default: measured faster to save, load and restore than zstd for
  // files ~1.2x larger (docs/PERFORMANCE.md); zstd pays on slow storage.
  Codec codec = Codec::kNone;
  int level = 1;                        // zstd level, kMinZstdLevel to kMaxZstdLevel
  uint64_t chunk_bytes = 4ull << 20;    // tensors are split into chunks of this size
  Shuffle shuffle = Shuffle::kAuto;
  uint32_t alignment = 4096;            // power of two, >= 64
  int threads = 0;                      // 0: the process's share of its node (util/node.h)
  ProgressCallback progress;
  // Runtime used to read device tensors (nullptr: DefaultRuntime()). Device
  // tensors stream device-to-host through a pinned ring of staging_bytes.
  DeviceRuntime* runtime = nullptr;
  uint64_t staging_bytes = 64ull << 20;
  // Orders the reads of device tensors after the caller's work (runtime.h).
  // Unset: the checkpoint's own (Checkpoint::caller_stream), if it has one.
  CallerStream caller_stream;
  FileSystem* fs = nullptr;             // nullptr: DefaultFileSystem() (file.h)
  // Recorded as the writer identity; default "rckpt <version>".
  std::string writer;
  // false: the save never replaces a file at the path (two jobs saving the
  // same step): it fails with AlreadyExists, writing nothing, when one is
  // there at the commit (FileSystem::OpenForAtomicCreate).
  bool replace = true;
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
  // Parses the CLI syntax: a device ("cpu", "cuda:0", "cuda") or a tag map
  // ("cuda:1=cuda:0,cuda:2=cuda"). InvalidArgument otherwise, its message
  // starting with `option`, the name the caller took the spec under
  // (`rckpt convert --set-device` parses its devices here too).
  static Result<MapLocation> Parse(std::string_view spec,
                                   std::string_view option = "map_location");

  bool is_set() const { return kind_ != Kind::kNone; }
  // A tag map (keys are exact device tags; a bare "cuda" is the current
  // device there too).
  bool is_tag_map() const { return kind_ == Kind::kMap; }
  // Whether the device or a tag map's key or target is a bare "cuda"
  // (Device::CurrentCuda()), which a load resolves before it places anything.
  bool NamesCurrentCuda() const;
  // This map with every Device::CurrentCuda() of its device or tag map
  // replaced by `current` (a callback's answers are resolved as they come);
  // InvalidArgument when a tag map then maps one device twice ("cuda" and
  // "cuda:3" in a process whose current device is cuda:3).
  Result<MapLocation> WithCurrentCuda(Device current) const;
  // Target for a tensor under this map alone (origin when not mapped).
  Device Apply(const TensorInfo& info) const { return Lookup(info).value_or(info.origin); }
  // The target this map gives a tensor; nullopt when it does not map it (a
  // tag map without its origin, a callback returning nothing). A callback is
  // called once per Lookup.
  std::optional<Device> Lookup(const TensorInfo& info) const;
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
  // Byte-shuffled bytes bound for a device, un-shuffled there (the kernel)
  // or on the host, and why the host did (the first reason met): no kernel
  // for this GPU or driver, device_unshuffle = false, no device memory for
  // the un-shuffle scratch, or a chunk larger than a staging slot
  // (staging_bytes below twice the largest chunk). "" when the host
  // un-shuffled nothing.
  uint64_t device_unshuffled_bytes = 0;
  uint64_t host_unshuffled_bytes = 0;
  std::string host_unshuffle_reason;
  // The runtime's pool once the load is done: the pinned staging, scratch,
  // streams and events it keeps for later calls, and the pinned cap.
  DevicePoolStats device_pool;
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
  int threads = 0;                      // 0: the process's share of its node (util/node.h)
  uint64_t staging_bytes = 64ull << 20; // pinned ring for device-bound data
  DeviceRuntime* runtime = nullptr;     // nullptr: DefaultRuntime()
  // What model_device "auto" and a bare "cuda" (Device::CurrentCuda(), in
  // map_location or model_device) mean, asked the first time a load needs
  // it, on the calling thread, with the runtime's device count: a CUDA
  // device index, or -1 for cpu ("cuda" is then DeviceUnavailable). An error
  // fails the load before any byte is read (the Python package's says so
  // when torch and rckpt disagree about the GPUs). Unset: the calling
  // thread's current device (DeviceRuntime::CurrentDevice) when there is a
  // GPU, else cpu.
  std::function<Result<int>(int device_count)> auto_device;
  // Orders the load's device writes against the caller's work (runtime.h).
  CallerStream caller_stream;
  // Allocates the device tensors Load, ReadTensors and the distributed load
  // return (above); nullptr: the runtime's own memory.
  DeviceAllocator* device_allocator = nullptr;
  // false: byte-shuffled chunks bound for a device are un-shuffled on the
  // host even where the device could (to measure one against the other).
  // Where the device cannot (DeviceRuntime::CanUnshuffle), the host does.
  bool device_unshuffle = true;
  FileSystem* fs = nullptr;             // nullptr: DefaultFileSystem() (file.h)
  ProgressCallback progress;
  LoadStats* stats = nullptr;           // filled when not null
};

}  // namespace rckpt

#endif  // RCKPT_OPTIONS_H_
