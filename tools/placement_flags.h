// The placement options shared by `plan`, `load` (and the demo's resume):
// --map-location, --model-device, --sections, --skip-sections,
// --emulate-devices, --cuda-driver.
#ifndef RCKPT_TOOLS_PLACEMENT_FLAGS_H_
#define RCKPT_TOOLS_PLACEMENT_FLAGS_H_

#include <memory>

#include "cli.h"
#include "rckpt/options.h"
#include "rckpt/runtime.h"

namespace rckpt::cli {

struct Placement {
  LoadOptions options;
  // The runtime of --emulate-devices N or --cuda-driver LIB (null: the
  // default one).
  std::unique_ptr<DeviceRuntime> runtime;
};

// Declares and parses the flags into `out`. InvalidArgument for a malformed
// value; giving both --map-location and --model-device is left to the
// library, which rejects it before any I/O.
Status ParsePlacementFlags(Args& args, Placement* out);

inline constexpr const char* kPlacementHelp =
    R"(placement options:
  --map-location SPEC      a device (cpu, cuda:0) or an exact tag map
                           (cuda:1=cuda:0,cuda:2=cuda:0); unmatched tags stay
  --model-device DEV       auto, cpu, cuda or cuda:N: model-role tensors go
                           there, everything else to cpu (incompatible with
                           --map-location)
  --sections A,B           read only these sections
  --skip-sections A,B      never read these sections (e.g. database)
  --emulate-devices N      use N host-emulated CUDA devices instead of the real
                           runtime (try placements on a machine without GPUs)
  --cuda-driver LIB        load this CUDA driver library instead of libcuda.so.1
--model-device auto is this process's current CUDA device (cuda:0 for a
command-line tool) when there is a GPU, else cpu; `rckpt doctor` says which.
RNG records and host-role tensors (scheduler, controller, metrics, evaluator,
optimizer step counters) always go to cpu.
)";

}  // namespace rckpt::cli

#endif  // RCKPT_TOOLS_PLACEMENT_FLAGS_H_
