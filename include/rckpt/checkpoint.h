// Checkpoint: the complete state of a training run held in memory, as it is
// saved and as a load returns it: sections, tensors, RNG records, the state
// tree and user metadata.
//
// Thread-safety: not synchronised; one thread mutates a Checkpoint at a time.
#ifndef RCKPT_CHECKPOINT_H_
#define RCKPT_CHECKPOINT_H_

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/rng.h"
#include "rckpt/runtime.h"
#include "rckpt/status.h"
#include "rckpt/tensor.h"
#include "rckpt/tree.h"

namespace rckpt {

// What a load does with a tensor (docs/DESIGN.md §4). Stored in files.
enum class Role : uint8_t {
  kModel = 0,  // follows model_device
  kHost = 1,   // always restored to host memory
  kData = 2,   // follows map_location; host under model_device
};
std::string_view RoleName(Role role);  // "model" "host" "data"
bool ParseRole(std::string_view name, Role* out);
bool IsValidRole(uint8_t raw);

// The role of a canonical section: model, loss, optimizer -> model;
// scheduler, controller, metrics, evaluator -> host; anything else -> data.
Role DefaultRoleForSection(std::string_view section);

// The role a tensor gets when none is given: its section's role, except that
// 0-d tensors named "...step" in a model-role "optimizer" section are host
// (torch keeps Adam's step counters on the CPU).
Role DefaultRoleForTensor(std::string_view section, Role section_role,
                          std::string_view name, const Shape& shape);

struct SectionInfo {
  std::string name;
  Role role = Role::kData;
};

// A stored tensor's header: what the file records of it besides its bytes.
// A map_location callback is told this for each model- or data-role tensor;
// the file reader's and inspect's records extend it.
struct TensorInfo {
  std::string name;
  std::string section;
  Role role = Role::kData;
  DType dtype = DType::kF32;
  Shape shape;
  Device origin;  // the device it was saved from
};

struct TensorEntry {
  std::string name;     // unique in the checkpoint
  std::string section;
  Role role = Role::kData;
  Tensor tensor;        // where the bytes are now
  // The origin device Save records when it differs from tensor.device(): a
  // host copy of a tensor saved from cuda:1 (an imported .pt file, an offline
  // --set-device rewrite). Loads set it to the origin recorded in the file,
  // whatever the target, so a load followed by a save keeps the recorded
  // origin. Unset: tensor.device().
  std::optional<Device> origin;

  Device Origin() const { return origin ? *origin : tensor.device(); }
};

// One block of a sharded tensor (format 1.1): the elements
// [offsets[d], offsets[d] + block.shape()[d]) of every dimension d of the
// tensor's global shape, held row-major by `block` (host or device memory;
// its device is recorded as the shard's origin unless `origin` says
// otherwise, as TensorEntry::origin), written by process `rank`.
struct TensorShard {
  int32_t rank = 0;
  Shape offsets;
  Tensor block;
  std::optional<Device> origin;

  Device Origin() const { return origin ? *origin : block.device(); }
};

// What a checkpoint's file records by itself, as opposed to what the
// importer that read it derived (rckpt/convert.h, ImportReport::recorded).
// All true: a .rckpt file, or a checkpoint built in memory.
struct Recorded {
  bool sections = true;   // section names and roles, each tensor's section and role
  bool origins = true;    // origin devices
  bool rng_kinds = true;  // which uint8 states are RNG records, and their kinds
  bool tree = true;       // the state tree (else a flat name -> tensor map)
  bool key_order = true;  // the order of map keys in the tree
  bool metadata = true;   // user metadata
};

// A tensor stored as blocks, as the ranks of a multi-process job hold it
// (distributed.h writes these collectively). Loads of a whole file assemble
// it into one tensor, so a loaded Checkpoint never holds one.
struct ShardedTensorEntry {
  std::string name;     // unique among all tensors of the checkpoint
  std::string section;
  Role role = Role::kData;
  DType dtype = DType::kF32;
  Shape shape;          // the global shape
  std::vector<TensorShard> shards;
};

class Checkpoint {
 public:
  Checkpoint() = default;

  // Declares a section with an explicit role. Sections are also created
  // implicitly by AddTensor with DefaultRoleForSection. InvalidArgument if
  // the section exists with another role or the name is empty.
  Status AddSection(std::string_view name, Role role);

  // Adds a tensor that borrows `view`'s memory (no copy): the caller keeps it
  // alive and unchanged until Save returns. The view's device is recorded as
  // the tensor's origin. InvalidArgument for an empty or duplicate name, a
  // null pointer with a non-zero size, or a shape whose byte size overflows.
  Status AddTensor(std::string_view section, std::string_view name,
                   const TensorView& view, std::optional<Role> role = {});
  // Adds a tensor sharing ownership of `tensor`'s bytes.
  Status AddTensor(std::string_view section, std::string_view name,
                   Tensor tensor, std::optional<Role> role = {});

  // Adds a sharded tensor of global `shape` whose blocks are `shards`
  // (their tensors are shared, not copied). InvalidArgument, naming the
  // shard, for an empty or duplicate name, a block whose dtype is not
  // `dtype`, and blocks that fall outside `shape`, overlap or leave a gap.
  // A tensor with no element has no shards: add it with AddTensor.
  Status AddShardedTensor(std::string_view section, std::string_view name, DType dtype,
                          Shape shape, std::vector<TensorShard> shards,
                          std::optional<Role> role = {});

  // Adds an RNG record (a copy of `bytes`). InvalidArgument for an empty or
  // duplicate name; Corruption if ValidateRngState rejects the bytes.
  Status AddRng(std::string_view name, RngKind kind,
                std::span<const std::byte> bytes, Device origin = Device::Cpu());

  Value& Tree() { return tree_; }
  const Value& Tree() const { return tree_; }
  std::map<std::string, std::string>& Metadata() { return metadata_; }
  const std::map<std::string, std::string>& Metadata() const { return metadata_; }

  const std::vector<SectionInfo>& sections() const { return sections_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  std::vector<TensorEntry>& mutable_tensors() { return tensors_; }
  // Saved after tensors(), in this order.
  const std::vector<ShardedTensorEntry>& sharded_tensors() const { return sharded_; }
  const std::vector<RngRecord>& rng() const { return rng_; }
  // Mutable access (e.g. to rewrite origins); keep names
  // unique and states valid.
  std::vector<RngRecord>& mutable_rng() { return rng_; }

  // nullptr when absent.
  const TensorEntry* FindTensor(std::string_view name) const;
  const RngRecord* FindRng(std::string_view name) const;
  const SectionInfo* FindSection(std::string_view name) const;

  // Total raw bytes of all tensors (sharded ones: their blocks').
  uint64_t TensorBytes() const;

  // The stream ordering of the checkpoint's device tensors: Save and
  // AsyncSaver::Save (and the libtorch adapter's) read them after the work
  // queued on it when their SaveOptions::caller_stream is unset. A library
  // that adds device tensors it knows the producer's stream of sets it
  // (rckpt::libtorch's AddModule, AddTensors and AddOptimizer set c10's
  // current stream), so that whichever Save the checkpoint reaches, the
  // tensors are read only after that work. Unset by default.
  void set_caller_stream(CallerStream stream) { caller_stream_ = std::move(stream); }
  const CallerStream& caller_stream() const { return caller_stream_; }

 private:
  Status CheckNewName(std::string_view name) const;

  std::vector<SectionInfo> sections_;
  Result<Role> SectionRoleFor(std::string_view section, std::string_view name,
                              const Shape& shape, std::optional<Role> role);

  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::vector<ShardedTensorEntry> sharded_;
  std::set<std::string, std::less<>> sharded_names_;
  std::vector<RngRecord> rng_;
  Value tree_;
  std::map<std::string, std::string> metadata_;
  CallerStream caller_stream_;
};

}  // namespace rckpt

#endif  // RCKPT_CHECKPOINT_H_
