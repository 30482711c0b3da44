// rckpt-train-demo: a small, real training run that checkpoints its whole
// state with rckpt, can be made to crash (after a step, or in the middle of
// writing a checkpoint), and resumes bit-identically -- on the same device
// or, through the load's placement options, on another one.
// See --help and docs/RESTARTING.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "options.h"
#include "rckpt/human_bytes.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "render.h"
#include "state_io.h"
#include "trainer.h"

namespace train_demo {
namespace {

using rckpt::Status;

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                   start)
      .count();
}

// Lines go out at once: a simulated crash must not lose them in a buffer.
void Print(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int Fail(const std::string& what, const Status& status) {
  // The user typed flags: name them, not the library's option fields.
  std::fprintf(stderr, "rckpt-train-demo: %s: %s: %s\n", what.c_str(),
               std::string(rckpt::StatusCodeName(status.code())).c_str(),
               rckpt::cli::InFlagTerms(status.message()).c_str());
  return rckpt::cli::ExitCodeFor(status);  // the rckpt CLI's codes (docs/CLI.md)
}

// Saves `state` to `path`. When `crash_midway`, aborts the process from the
// save's progress callback once half of the bytes are written, as a machine
// failure during a checkpoint would.
Status SaveState(const TrainState& state, const std::string& path,
                 rckpt::DeviceRuntime* runtime, bool crash_midway, const char* label) {
  auto start = std::chrono::steady_clock::now();
  RCKPT_ASSIGN_OR_RETURN(rckpt::Checkpoint ck, ToCheckpoint(state));
  rckpt::SaveOptions options;
  options.runtime = runtime;
  if (crash_midway) {
    options.progress = [&path](uint64_t done, uint64_t total) {
      if (total > 0 && 2 * done >= total) {
        std::fprintf(stderr,
                     "rckpt-train-demo: --stop-in-save: crashing while writing %s "
                     "(%llu of %llu bytes)\n",
                     path.c_str(), static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(total));
        std::abort();
      }
      return true;
    };
  }
  RCKPT_RETURN_IF_ERROR(rckpt::Save(path, ck, options));
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), ": %s saved in %.1f ms",
                rckpt::HumanBytes(ck.TensorBytes()).c_str(), MillisecondsSince(start));
  Print(std::string(label) + " step " + std::to_string(state.controller.global_step) +
        " -> " + path + numbers);
  return Status::Ok();
}

// A resumed run takes its seed and width from the checkpoint. The same
// command line with --resume added must keep working, so --seed / --hidden
// are accepted when they equal the stored values and refused, naming both,
// when they conflict.
Status CheckResumeFlags(const DemoOptions& opt, const Config& stored) {
  if (opt.seed_given && opt.seed != stored.seed) {
    return Status::InvalidArgument(
        "--seed " + std::to_string(opt.seed) + " conflicts with the checkpoint's seed " +
        std::to_string(stored.seed) + "; a resumed run keeps its seed (drop --seed)");
  }
  if (opt.hidden_given && opt.hidden != stored.hidden) {
    return Status::InvalidArgument(
        "--hidden " + std::to_string(opt.hidden) + " conflicts with the checkpoint's hidden " +
        std::to_string(stored.hidden) + "; a resumed run keeps its width (drop --hidden)");
  }
  return Status::Ok();
}

int Run(const DemoOptions& opt) {
  // The runtime outlives every tensor (device masters free through it).
  std::unique_ptr<rckpt::DeviceRuntime> own;
  rckpt::DeviceRuntime* runtime = &rckpt::DefaultRuntime();
  if (opt.emulate_devices >= 0 && !opt.cuda_driver.empty()) {
    return Fail("invalid options", Status::InvalidArgument(
                                       "--emulate-devices and --cuda-driver are incompatible"));
  }
  if (opt.emulate_devices >= 0) {
    own = rckpt::NewEmulatedRuntime(opt.emulate_devices);
    runtime = own.get();
  }
  if (!opt.cuda_driver.empty()) {
    rckpt::Result<std::unique_ptr<rckpt::DeviceRuntime>> cuda =
        rckpt::NewCudaRuntime({.driver_library = opt.cuda_driver});
    if (!cuda.ok()) return Fail("invalid options", cuda.status());
    own = std::move(*cuda);
    runtime = own.get();
  }
  DeviceMemory memory(runtime);
  // --device cuda: this process's current device, as a load's "cuda" is.
  rckpt::Device device = opt.device;
  if (device.is_current_cuda()) {
    rckpt::Result<int> current = runtime->CurrentDevice();
    if (!current.ok()) return Fail("invalid options", current.status().WithContext("--device cuda"));
    device = rckpt::Device::Cuda(*current);
  }

  TrainState state;
  if (opt.resume.empty()) {
    Config config;
    config.seed = opt.seed;
    config.hidden = opt.hidden;
    rckpt::Result<TrainState> fresh = NewRun(config, device, memory);
    if (!fresh.ok()) return Fail("cannot start", fresh.status());
    state = std::move(fresh).value();
    Print("fresh run: seed " + std::to_string(config.seed) + ", " +
          std::to_string(state.ParameterCount()) + " parameters, device " +
          device.ToString() + " (runtime " + std::string(runtime->name()) + ")");
  } else {
    auto start = std::chrono::steady_clock::now();
    rckpt::LoadOptions options;
    options.map_location = opt.map_location;
    options.model_device = opt.model_device;
    options.runtime = runtime;
    // Load validates the placement options before it opens the file.
    rckpt::Result<rckpt::Checkpoint> ck = rckpt::Load(opt.resume, options);
    if (!ck.ok()) return Fail("cannot resume from " + opt.resume, ck.status());
    rckpt::Result<TrainState> restored = FromCheckpoint(*ck, memory);
    if (!restored.ok()) return Fail("cannot resume from " + opt.resume, restored.status());
    state = std::move(restored).value();
    if (Status s = CheckResumeFlags(opt, state.config); !s.ok()) {
      return Fail("cannot resume from " + opt.resume, s);
    }
    char numbers[128];
    std::snprintf(numbers, sizeof(numbers),
                  " at step %lld (epoch %lld, batch %lld): restored in %.1f ms",
                  static_cast<long long>(state.controller.global_step),
                  static_cast<long long>(state.controller.epoch),
                  static_cast<long long>(state.cursor / state.config.batch_size),
                  MillisecondsSince(start));
    Print("resumed " + opt.resume + numbers);
  }
  Print("placement: " + DescribePlacement(state));

  int64_t saves = 0;
  auto train_start = std::chrono::steady_clock::now();
  const int64_t first_step = state.controller.global_step;
  while (!state.Done(opt.steps)) {
    size_t epochs_before = state.metrics.history.size();
    if (Status s = Step(state, memory); !s.ok()) return Fail("training step", s);
    if (state.metrics.history.size() != epochs_before) {
      Print(DescribeEpoch(state.metrics.history.back()));
    }
    const int64_t step = state.controller.global_step;
    if (!opt.checkpoint.empty() && step % opt.checkpoint_every == 0) {
      ++saves;
      bool crash = opt.stop_in_save && *opt.stop_in_save == saves;
      if (Status s = SaveState(state, opt.checkpoint, runtime, crash, "checkpoint");
          !s.ok()) {
        return Fail("cannot save checkpoint " + opt.checkpoint, s);
      }
    }
    if (opt.stop_after && *opt.stop_after == step) {
      std::fprintf(stderr, "rckpt-train-demo: --stop-after %lld: crashing now\n",
                   static_cast<long long>(step));
      std::abort();
    }
  }
  char line[200];
  std::snprintf(line, sizeof(line), "trained steps %lld..%lld in %.1f ms%s",
                static_cast<long long>(first_step),
                static_cast<long long>(state.controller.global_step),
                MillisecondsSince(train_start),
                state.controller.stopped_early ? " (stopped early)" : "");
  Print(line);
  if (!opt.final_path.empty()) {
    if (Status s = SaveState(state, opt.final_path, runtime, false, "final"); !s.ok()) {
      return Fail("cannot save final checkpoint " + opt.final_path, s);
    }
  }
  return 0;
}

}  // namespace
}  // namespace train_demo

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  rckpt::Result<train_demo::DemoOptions> opt = train_demo::ParseOptions(args);
  if (!opt.ok()) {
    std::fprintf(stderr, "rckpt-train-demo: %s (see --help)\n",
                 opt.status().ToString().c_str());
    return rckpt::cli::ExitCodeFor(opt.status());
  }
  if (opt->help) {
    std::fputs(train_demo::UsageText().c_str(), stdout);
    return 0;
  }
  return train_demo::Run(*opt);
}
