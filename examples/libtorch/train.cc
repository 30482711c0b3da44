// A libtorch training loop that checkpoints with rckpt::libtorch and resumes
// bit-identically: each checkpoint holds the model, the optimizer's state,
// torch's RNG states (the batches and the dropout masks draw from them) and
// the step, in the layout Python's rckpt writes, so Python can resume the run
// too (docs/CPP.md).
//
//   train --run DIR [--steps N] [--every K] [--stop-after S] [--resume FILE]
//         [--optimizer adam|adamw|sgd] [--device cpu|cuda] [--seed S]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "net.h"
#include "rckpt/torch.h"

namespace {

constexpr char kUsage[] =
    "usage: train --run DIR [--steps N] [--every K] [--stop-after S] [--resume FILE]\n"
    "             [--optimizer adam|adamw|sgd] [--device cpu|cuda] [--seed S]\n"
    "\n"
    "Trains a small network (net.h) on batches drawn from torch's RNG and writes\n"
    "DIR/last.rckpt every K steps and after the last one: the model, the optimizer's\n"
    "state, every RNG state of torch and the step. --stop-after S stops after step S,\n"
    "as a crash would; --resume FILE continues from a checkpoint, this program's or\n"
    "one Python wrote in the same layout, to the same result as a run that never\n"
    "stopped.\n"
    "\n"
    "  --run DIR         where last.rckpt goes (created)\n"
    "  --steps N         train until step N (default 8)\n"
    "  --every K         checkpoint every K steps (default 4)\n"
    "  --stop-after S    stop after step S\n"
    "  --resume FILE     continue from FILE\n"
    "  --optimizer NAME  adam (default), adamw or sgd (with momentum)\n"
    "  --device DEV      cpu (default) or cuda (c10's current device)\n"
    "  --seed S          torch::manual_seed for a new run (default 0)\n";

struct Options {
  std::string run;
  int64_t steps = 8;
  int64_t every = 4;
  int64_t stop_after = -1;
  std::string resume;
  std::string optimizer = "adam";
  std::string device = "cpu";
  uint64_t seed = 0;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr, "train: %s\n\n%s", problem.c_str(), kUsage);
  return 2;
}

bool ParseInt(const char* text, int64_t* out) {
  char* end = nullptr;
  *out = std::strtoll(text, &end, 10);
  return end != text && *end == '\0';
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const std::string& name, Net& net) {
  if (name == "adam") {
    return std::make_unique<torch::optim::Adam>(net->parameters(),
                                                torch::optim::AdamOptions(1e-2));
  }
  if (name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        net->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(1e-2));
  }
  return std::make_unique<torch::optim::SGD>(net->parameters(),
                                             torch::optim::SGDOptions(0.05).momentum(0.9));
}

// What the batches are fitted to: fixed, so it needs no RNG.
torch::Tensor Teacher(const torch::Device& device) {
  return torch::arange(32, torch::kFloat).reshape({8, 4}).sin().to(device);
}

rckpt::Status SaveCheckpoint(const std::string& path, Net& net,
                             const torch::optim::Optimizer& optimizer, int64_t step,
                             double loss) {
  rckpt::Checkpoint ck;
  RCKPT_RETURN_IF_ERROR(rckpt::libtorch::AddModule(&ck, *net));            // "model"
  RCKPT_RETURN_IF_ERROR(rckpt::libtorch::AddOptimizer(&ck, optimizer));    // "optimizer"
  RCKPT_RETURN_IF_ERROR(rckpt::libtorch::CaptureRng(&ck));                 // torch.cpu, torch.cuda.<i>
  ck.Tree()["controller"]["step"] = step;
  ck.Tree()["controller"]["loss"] = loss;
  return rckpt::libtorch::Save(path, ck);  // atomic: a crash keeps the previous file
}

// Restores the run from `path`; returns the step it had reached.
rckpt::Result<int64_t> Resume(const std::string& path, Net& net,
                              torch::optim::Optimizer& optimizer) {
  rckpt::LoadOptions options;
  options.model_device = rckpt::DeviceSpec::Auto();  // this machine's GPU, or the CPU
  RCKPT_ASSIGN_OR_RETURN(rckpt::libtorch::Loaded ck, rckpt::libtorch::Load(path, options));
  RCKPT_RETURN_IF_ERROR(rckpt::libtorch::RestoreModule(ck, *net));
  RCKPT_RETURN_IF_ERROR(rckpt::libtorch::RestoreOptimizer(ck, optimizer));
  RCKPT_ASSIGN_OR_RETURN(rckpt::libtorch::RngRestoreReport rng, rckpt::libtorch::RestoreRng(ck));
  if (rng.restored.empty()) {  // a resume without torch's generators is not bit-identical
    return rckpt::Status::InvalidArgument("'" + path + "' has no RNG record for torch's generators");
  }
  const rckpt::Value* controller = ck.checkpoint.Tree().Find("controller");
  const rckpt::Value* step = controller != nullptr ? controller->Find("step") : nullptr;
  if (step == nullptr || step->kind() != rckpt::ValueKind::kInt) {
    return rckpt::Status::InvalidArgument("'" + path + "' has no controller.step (an int)");
  }
  return step->as_int();
}

int Train(const Options& o) {
  const torch::Device device = o.device == "cuda" ? torch::Device(torch::kCUDA) : torch::kCPU;
  torch::manual_seed(o.seed);
  Net net;
  net->to(device);
  std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(o.optimizer, net);
  int64_t step = 0;
  if (!o.resume.empty()) {
    rckpt::Result<int64_t> resumed = Resume(o.resume, net, *optimizer);
    if (!resumed.ok()) {
      std::fprintf(stderr, "train: --resume %s: %s\n", o.resume.c_str(),
                   resumed.status().ToString().c_str());
      return 1;
    }
    step = *resumed;
    std::printf("resumed %s at step %lld\n", o.resume.c_str(), static_cast<long long>(step));
  }
  std::filesystem::create_directories(o.run);
  const std::string path = o.run + "/last.rckpt";
  const torch::Tensor teacher = Teacher(device);
  net->train();
  while (step < o.steps) {
    const torch::Tensor x = torch::randn({64, 8}, device);
    const torch::Tensor y = x.matmul(teacher) + 0.1 * torch::randn({64, 4}, device);
    optimizer->zero_grad();
    torch::Tensor loss = torch::mse_loss(net->forward(x), y);
    loss.backward();
    optimizer->step();
    ++step;
    const double value = loss.item<double>();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), value);
    if (step % o.every == 0 || step == o.steps || step == o.stop_after) {
      rckpt::Status saved = SaveCheckpoint(path, net, *optimizer, step, value);
      if (!saved.ok()) {
        std::fprintf(stderr, "train: saving %s: %s\n", path.c_str(), saved.ToString().c_str());
        return 1;
      }
      std::printf("saved %s at step %lld\n", path.c_str(), static_cast<long long>(step));
    }
    if (step == o.stop_after) {
      std::printf("stopping after step %lld, as a crash would\n", static_cast<long long>(step));
      return 0;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Usage(std::string(flag) + " needs a value");
    const char* value = argv[++i];
    bool ok = true;
    if (flag == "--run") o.run = value;
    else if (flag == "--resume") o.resume = value;
    else if (flag == "--optimizer") o.optimizer = value;
    else if (flag == "--device") o.device = value;
    else if (flag == "--steps") ok = ParseInt(value, &o.steps) && o.steps >= 0;
    else if (flag == "--every") ok = ParseInt(value, &o.every) && o.every > 0;
    else if (flag == "--stop-after") ok = ParseInt(value, &o.stop_after) && o.stop_after > 0;
    else if (flag == "--seed") {
      int64_t seed = 0;
      ok = ParseInt(value, &seed) && seed >= 0;
      o.seed = static_cast<uint64_t>(seed);
    } else {
      return Usage("unknown option " + std::string(flag));
    }
    if (!ok) return Usage(std::string(flag) + " " + value + ": expected a whole number in range");
  }
  if (o.run.empty()) return Usage("--run DIR is required");
  if (o.optimizer != "adam" && o.optimizer != "adamw" && o.optimizer != "sgd") {
    return Usage("--optimizer " + o.optimizer + ": expected adam, adamw or sgd");
  }
  if (o.device != "cpu" && o.device != "cuda") {
    return Usage("--device " + o.device + ": expected cpu or cuda");
  }
  if (o.device == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "train: --device cuda: libtorch sees no CUDA device\n");
    return 1;
  }
  try {
    return Train(o);
  } catch (const std::exception& e) {  // libtorch's own (rckpt::libtorch returns a Status)
    std::fprintf(stderr, "train: %s\n", e.what());
    return 1;
  }
}
