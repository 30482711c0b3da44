#include "options.h"

#include <charconv>
#include <string_view>

namespace train_demo {
namespace {

using rckpt::Result;
using rckpt::Status;

Result<int64_t> ParseInt(std::string_view option, std::string_view text,
                         int64_t min_value) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(std::string(option) +
                                   ": expected an integer, got '" +
                                   std::string(text) + "'");
  }
  if (value < min_value) {
    return Status::InvalidArgument(std::string(option) + ": expected at least " +
                                   std::to_string(min_value) + ", got " +
                                   std::to_string(value));
  }
  return value;
}

Result<uint64_t> ParseSeed(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::InvalidArgument(
        "--seed: expected an unsigned integer, got '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

Result<DemoOptions> ParseOptions(const std::vector<std::string>& args) {
  DemoOptions o;
  bool map_location_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::string name(arg);
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
      has_value = true;
    }
    auto next = [&]() -> Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument(name + ": missing its value");
      }
      return args[++i];
    };
    if (name == "--help" || name == "-h") {
      o.help = true;
    } else if (name == "--steps") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.steps, ParseInt(name, v, 0));
    } else if (name == "--checkpoint") {
      RCKPT_ASSIGN_OR_RETURN(o.checkpoint, next());
    } else if (name == "--checkpoint-every") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.checkpoint_every, ParseInt(name, v, 1));
    } else if (name == "--stop-after") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.stop_after, ParseInt(name, v, 1));
    } else if (name == "--stop-in-save") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.stop_in_save, ParseInt(name, v, 1));
    } else if (name == "--resume") {
      RCKPT_ASSIGN_OR_RETURN(o.resume, next());
    } else if (name == "--map-location") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      Result<rckpt::MapLocation> m = rckpt::MapLocation::Parse(v);
      if (!m.ok()) return m.status().WithContext("--map-location");
      o.map_location = std::move(m).value();
      map_location_given = true;
    } else if (name == "--model-device") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      Result<rckpt::DeviceSpec> d = rckpt::DeviceSpec::Parse(v);
      if (!d.ok()) return d.status().WithContext("--model-device");
      o.model_device = *d;
    } else if (name == "--final") {
      RCKPT_ASSIGN_OR_RETURN(o.final_path, next());
    } else if (name == "--seed") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.seed, ParseSeed(v));
      o.seed_given = true;
    } else if (name == "--hidden") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(o.hidden, ParseInt(name, v, 1));
      if (o.hidden > 4096) {
        return Status::InvalidArgument("--hidden: expected at most 4096, got " +
                                       std::to_string(o.hidden));
      }
      o.hidden_given = true;
    } else if (name == "--emulate-devices") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      RCKPT_ASSIGN_OR_RETURN(int64_t n, ParseInt(name, v, 0));
      if (n > 64) {
        return Status::InvalidArgument(
            "--emulate-devices: expected at most 64, got " + std::to_string(n));
      }
      o.emulate_devices = static_cast<int>(n);
    } else if (name == "--cuda-driver") {
      RCKPT_ASSIGN_OR_RETURN(o.cuda_driver, next());
    } else if (name == "--device") {
      RCKPT_ASSIGN_OR_RETURN(std::string v, next());
      Result<rckpt::Device> d = rckpt::ParseDevice(v);
      if (!d.ok()) return d.status().WithContext("--device");
      o.device = *d;
      o.device_given = true;
    } else {
      return Status::InvalidArgument("unknown option '" + std::string(arg) + "'");
    }
  }
  if (o.help) return o;
  if (o.resume.empty()) {
    if (map_location_given || o.model_device) {
      return Status::InvalidArgument(
          "--map-location / --model-device choose where a resumed run's "
          "tensors go; they need --resume PATH (a fresh run uses --device)");
    }
  } else {
    // A resumed run continues the stored run: its shape, data and seed come
    // from the checkpoint, and its devices from the load's placement.
    if (o.device_given) {
      return Status::InvalidArgument(
          "--device applies to fresh runs; a resumed run lives where the load "
          "puts it: use --model-device auto|cpu|cuda:N or --map-location SPEC");
    }
    // --seed / --hidden may repeat the fresh run's command line: the resume
    // checks them against the checkpoint (CheckResumeFlags, main.cc).
  }
  if (o.stop_in_save && o.checkpoint.empty()) {
    return Status::InvalidArgument(
        "--stop-in-save counts periodic checkpoints: it needs --checkpoint PATH");
  }
  return o;
}

std::string UsageText() {
  return R"(rckpt-train-demo: trains a small MLP with Adam, checkpoints it with rckpt,
and resumes it bit-identically -- also on other devices.

Fresh run:
  rckpt-train-demo --steps 60 --checkpoint run/last.rckpt --checkpoint-every 10 \
                   --final run/final.rckpt [--seed X] [--hidden H] [--device cpu|cuda:N]
Resume (continues from the checkpoint's exact step, RNG engines included):
  rckpt-train-demo --resume run/last.rckpt --steps 60 --final run/final.rckpt \
                   [--model-device auto|cpu|cuda:N | --map-location SPEC]

Options:
  --steps N             train until the global step reaches N (default 60)
  --checkpoint PATH     save the whole training state here every K steps
  --checkpoint-every K  (default 10)
  --final PATH          save the final state here when training ends
  --seed X              data set, initial weights, shuffling and dropout (default 1)
  --hidden H            width of the two hidden layers (default 64)
                        (on resume both come from the checkpoint: given
                        again, they must equal its values)
  --device D            where a fresh run keeps its model, optimizer and data
                        tensors: cpu or cuda:N (default cpu)
  --resume PATH         continue the run saved at PATH
  --model-device SPEC   on resume: model, loss and optimizer tensors to SPEC
                        (auto = this process's current GPU, cuda:0, if
                        this machine has one, else cpu);
                        everything else to host memory
  --map-location SPEC   on resume: every model/data tensor to one device
                        ("cpu", "cuda:0") or by origin tag ("cuda:1=cuda:0");
                        RNG, metrics and step counters always stay on host
                        (give --model-device or --map-location, not both)
  --stop-after S        crash (abort, no cleanup) after global step S and
                        its checkpoint, if one falls on it
  --stop-in-save K      crash in the middle of writing the K-th checkpoint
  --emulate-devices N   use N host-emulated CUDA devices instead of the real
                        runtime (try placements on a machine without GPUs)
  --cuda-driver LIB     load this CUDA driver library instead of libcuda.so.1
  --help                this text

Example: a run on GPU 1 crashes and continues on this machine, identically:
  rckpt-train-demo --emulate-devices 2 --device cuda:1 --steps 300 \
                   --checkpoint last.rckpt --checkpoint-every 50 --stop-after 175
  rckpt-train-demo --resume last.rckpt --model-device auto --steps 300 \
                   --final final.rckpt

Without placement options a resume puts every tensor back on the device it
was saved from, and fails with exit code 6 if that device does not exist
here. Exit codes: 0 ok, 2 invalid options, 3 file not found, 4 corrupt file,
5 unsupported, 6 device unavailable/error, 7 I/O error, 8 out of memory.
See docs/RESTARTING.md.
)";
}

}  // namespace train_demo
