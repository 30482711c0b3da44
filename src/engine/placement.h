// The placement planner: which device every tensor and RNG record of a file
// goes to under a LoadOptions, on a machine whose CUDA devices a
// DeviceInventory describes. No I/O, and the runtime is asked only through
// the inventory, only when a placement needs a device: a load that places
// everything on the CPU never touches the driver. The policy of
// docs/DESIGN.md §4.
#ifndef RCKPT_SRC_ENGINE_PLACEMENT_H_
#define RCKPT_SRC_ENGINE_PLACEMENT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "format/meta.h"
#include "rckpt/io.h"
#include "rckpt/options.h"
#include "rckpt/runtime.h"

namespace rckpt {

// "no CUDA device", "1 CUDA device (cuda:0)", "4 CUDA devices (cuda:0 to
// cuda:3)".
std::string DescribeCudaDevices(int cuda_device_count);

// The machine's CUDA devices as one call sees them. Nothing is asked of the
// runtime until a question needs it, and each answer is kept for the call.
// Not thread-safe: one call, one thread (the calling thread, so that the
// current device is the caller's).
class DeviceInventory {
 public:
  // Over `runtime`. `auto_device` says what "auto" means
  // (LoadOptions::auto_device); unset: the calling thread's current device
  // (DeviceRuntime::CurrentDevice) when there is a GPU, else cpu.
  DeviceInventory(DeviceRuntime& runtime,
                  std::function<Result<int>(int device_count)> auto_device);
  // A machine with `count` devices (PlanLoad for another machine); "auto"
  // means cuda:0 there.
  static DeviceInventory Assumed(int count);

  // The runtime's DeviceCount (an unusable driver is its error).
  Result<int> Count();
  // "no CUDA device (libcuda.so.1 was not found ...)", "2 CUDA devices
  // (cuda:0 to cuda:1)"; "" when Count() fails.
  std::string Describe();
  // cpu: true, without asking anything.
  Result<bool> Exists(Device device);
  // What model_device "auto" is: the current device when there is a GPU,
  // else cpu (or what auto_device says).
  Result<Device> Auto();
  // What a bare "cuda" (Device::CurrentCuda()) is: the current device, which
  // must exist; `what` names the option in the error (DeviceUnavailable)
  // where there is no GPU or the current device does not exist.
  Result<Device> CurrentCuda(const std::string& what);
  // `d` itself, or CurrentCuda(what) for a bare "cuda".
  Result<Device> Resolve(Device d, const std::string& what);

 private:
  DeviceInventory() = default;
  // The current device's index (auto_device's answer, or the runtime's when
  // there is a GPU), -1 for none; asked once.
  Result<int> CurrentIndex();
  DeviceRuntime* runtime_ = nullptr;
  std::function<Result<int>(int)> auto_device_;
  std::optional<int> current_;
  std::optional<Result<int>> count_;
  std::string no_device_reason_;
};

// The checks a load makes before it opens its file, in this order:
// map_location together with model_device (InvalidArgument), staging_bytes
// of 0 or negative threads (InvalidArgument), a model_device that does not
// exist here (DeviceUnavailable naming it and the devices present).
Status CheckLoadOptions(const LoadOptions& options, DeviceInventory& devices);

// The canonical section names (docs/DESIGN.md §4), which sections and
// skip_sections accept even when the file lacks them.
const std::vector<std::string>& CanonicalSections();

// The indices of the tensors a load with `options` reads: those of
// `sections` (all when empty) and not of `skip_sections` (a name in both is
// skipped). InvalidArgument for a name that is neither a section of the file
// nor a canonical one, listing the file's sections (and the closest name).
Result<std::vector<size_t>> SelectTensors(
    const std::vector<SectionInfo>& sections,
    const std::vector<TensorMeta>& tensors, const LoadOptions& options);

struct LoadPlan {
  // The selected tensors in file order, then every RNG record.
  std::vector<Placement> placements;
  // For placements[i] with i < tensor_index.size(): the tensor's index in
  // the manifest's tensor list.
  std::vector<size_t> tensor_index;
};

// Plans a load: selects the tensors (SelectTensors), then places each by the
// policy: RNG records and host-role tensors to cpu (nothing consulted);
// model-role tensors to model_device when given, data-role tensors to cpu
// under model_device; otherwise map_location's answer, or the origin.
// A target that does not exist is DeviceUnavailable naming the tensor (the
// first in file order), its origin, the target and the devices present;
// as stored, the message also names the options that would fix it, and for
// a tag map without an entry for the origin, the file's saved devices.
// `only`, when not null, restricts planning to those tensor indices (in
// that order) and ignores section selection.
Result<LoadPlan> PlanPlacements(const std::vector<SectionInfo>& sections,
                                const std::vector<TensorMeta>& tensors,
                                const std::vector<RngRecord>& rng,
                                const LoadOptions& options,
                                DeviceInventory& devices,
                                const std::vector<size_t>* only = nullptr);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_PLACEMENT_H_
