// Command-line options of rckpt-train-demo.
#ifndef RCKPT_EXAMPLES_TRAIN_DEMO_OPTIONS_H_
#define RCKPT_EXAMPLES_TRAIN_DEMO_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/device.h"
#include "rckpt/options.h"
#include "rckpt/status.h"

namespace train_demo {

struct DemoOptions {
  bool help = false;
  int64_t steps = 60;                  // train until the global step reaches this
  std::string checkpoint;              // empty: no periodic checkpoints
  int64_t checkpoint_every = 10;
  std::optional<int64_t> stop_after;   // crash after this global step
  std::optional<int64_t> stop_in_save; // crash inside the K-th checkpoint save
  std::string resume;                  // empty: fresh run
  rckpt::MapLocation map_location;
  std::optional<rckpt::DeviceSpec> model_device;
  std::string final_path;              // empty: no final checkpoint
  uint64_t seed = 1;
  int64_t hidden = 64;
  int emulate_devices = -1;            // < 0: the real runtime
  std::string cuda_driver;             // non-empty: the CUDA driver library to load
  rckpt::Device device;                // fresh runs only
  bool seed_given = false;
  bool hidden_given = false;
  bool device_given = false;
};

// Parses argv. InvalidArgument naming the option and the bad value; usage
// mistakes (an option without its value, placement options without
// --resume, --device with --resume) are InvalidArgument too. Conflicting
// --map-location and --model-device are left for rckpt::Load to reject, so
// the demo shows the library's own check.
rckpt::Result<DemoOptions> ParseOptions(const std::vector<std::string>& args);

// The --help text.
std::string UsageText();

}  // namespace train_demo

#endif  // RCKPT_EXAMPLES_TRAIN_DEMO_OPTIONS_H_
