// The placement planner: which device every tensor and RNG record of a file
// goes to under a LoadOptions, on a machine with a given number of CUDA
// devices. Pure: no I/O, no runtime; the policy of docs/DESIGN.md §4.
#ifndef RCKPT_SRC_ENGINE_PLACEMENT_H_
#define RCKPT_SRC_ENGINE_PLACEMENT_H_

#include <string>
#include <vector>

#include "format/file_reader.h"
#include "rckpt/io.h"
#include "rckpt/options.h"

namespace rckpt {

// "no CUDA device", "1 CUDA device (cuda:0)", "4 CUDA devices (cuda:0 to
// cuda:3)".
std::string DescribeCudaDevices(int cuda_device_count);

// True for cpu and for cuda:N with N < cuda_device_count.
bool DeviceExists(Device device, int cuda_device_count);

// The checks a load makes before it opens its file, in this order:
// map_location together with model_device (InvalidArgument), staging_bytes
// of 0 or negative threads (InvalidArgument), a model_device that does not
// exist here (DeviceUnavailable naming it and the devices present).
Status CheckLoadOptions(const LoadOptions& options, int cuda_device_count);

// The canonical section names (docs/DESIGN.md §4), which sections and
// skip_sections accept even when the file lacks them.
const std::vector<std::string>& CanonicalSections();

// The indices of the tensors a load with `options` reads: those of
// `sections` (all when empty) and not of `skip_sections` (a name in both is
// skipped). InvalidArgument for a name that is neither a section of the file
// nor a canonical one, listing the known names.
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
// as stored, the message also names the options that would fix it.
// `only`, when not null, restricts planning to those tensor indices (in
// that order) and ignores section selection.
Result<LoadPlan> PlanPlacements(const std::vector<SectionInfo>& sections,
                                const std::vector<TensorMeta>& tensors,
                                const std::vector<RngRecord>& rng,
                                const LoadOptions& options,
                                int cuda_device_count,
                                const std::vector<size_t>* only = nullptr);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_PLACEMENT_H_
