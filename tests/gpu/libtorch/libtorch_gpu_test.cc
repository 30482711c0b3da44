// rckpt::libtorch on a GPU: loaded CUDA tensors are c10's caching allocator's
// own, loads and saves are ordered with c10's current stream, "auto" is c10's
// current device, CUDA generators round-trip, and a training run on the GPU
// resumes bit-identically. Only libtorch's device-generic API is used, so no
// CUDA toolkit is needed to build it.
//
//   libtorch_gpu_test [--require-gpu]    (without a GPU: SKIPPED, exit 0; 1 with --require-gpu)
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "rckpt/torch.h"

namespace {

namespace rt = rckpt::libtorch;

int failures = 0;

// Not CHECK: c10's logging defines that.
#define VERIFY(cond)                                                                 \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: VERIFY(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)
#define VERIFY_OK(expr)                                                              \
  do {                                                                               \
    const ::rckpt::Status s_ = (expr);                                               \
    if (!s_.ok()) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,             \
                   s_.ToString().c_str());                                           \
      ++failures;                                                                    \
      return;                                                                        \
    }                                                                                \
  } while (0)

const c10::Device kCuda0(c10::DeviceType::CUDA, 0);

std::string TempPath(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto p = std::filesystem::temp_directory_path() /
             ("rckpt-torch-gpu-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return (dir / name).string();
}

// A stream of cuda:0 that is not the default one, made current by a guard.
c10::Stream SideStream() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStreamFromGlobalPool(kCuda0);
}

// Queues ~tens of milliseconds of work on the current stream, so that what
// is queued after it runs late.
void Busy() {
  at::Tensor a = torch::randn({4096, 4096}, torch::TensorOptions().device(kCuda0));
  for (int i = 0; i < 40; ++i) a = torch::mm(a, a).div_(4096);
}

void LoadedTensorsAreC10sOwn() {
  const std::string path = TempPath("tensors.rckpt");
  rt::TensorDict tensors;
  tensors.insert("w", torch::arange(1 << 20, torch::kFloat));  // on the CPU
  VERIFY_OK(rt::SaveTensors(path, tensors));
  rckpt::LoadOptions options;
  options.model_device = rckpt::DeviceSpec::Auto();  // c10's current device: cuda:0
  rckpt::Result<rt::Loaded> ck = rt::Load(path, options);
  VERIFY_OK(ck.status());
  const at::Tensor& w = ck->tensors.at("model.w");
  VERIFY(w.device() == kCuda0);
  VERIFY(w.storage().allocator() == c10::GetAllocator(c10::DeviceType::CUDA));
  VERIFY(torch::equal(w.cpu(), tensors["w"]));
  rckpt::Result<rt::TensorDict> again = rt::LoadTensors(path, "model", options);
  VERIFY_OK(again.status());
  VERIFY((*again)["w"].storage().allocator() == c10::GetAllocator(c10::DeviceType::CUDA));
  VERIFY(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice() == kCuda0);
}

void LoadIntoWaitsForTheCurrentStream() {
  const std::string path = TempPath("ones.rckpt");
  torch::nn::Linear saved(1024, 1024);
  {
    torch::NoGradGuard no_grad;
    saved->weight.fill_(1);
    saved->bias.fill_(1);
  }
  VERIFY_OK(rt::SaveModule(path, *saved));
  torch::nn::Linear net(1024, 1024);
  net->to(kCuda0);
  c10::StreamGuard guard(SideStream());
  {
    torch::NoGradGuard no_grad;
    Busy();
    net->weight.fill_(7);  // queued behind Busy(): the load must come after it
  }
  VERIFY_OK(rt::LoadInto(path, *net));
  // Work queued on the stream now sees the loaded bytes.
  VERIFY(net->weight.sum().item<double>() == 1024.0 * 1024.0);
  VERIFY(torch::equal(net->bias.cpu(), torch::ones({1024})));
}

void SaveWaitsForTheCurrentStream() {
  const std::string path = TempPath("threes.rckpt");
  torch::nn::Linear net(1024, 1024);
  net->to(kCuda0);
  torch::cuda::synchronize();
  c10::StreamGuard guard(SideStream());
  {
    torch::NoGradGuard no_grad;
    Busy();
    net->weight.fill_(3);  // queued behind Busy(): the save must read after it
  }
  VERIFY_OK(rt::SaveModule(path, *net));
  rckpt::LoadOptions cpu;
  cpu.map_location = rckpt::MapLocation::To(rckpt::Device::Cpu());
  rckpt::Result<rt::TensorDict> back = rt::LoadTensors(path, "model", cpu);
  VERIFY_OK(back.status());
  VERIFY(torch::equal((*back)["weight"], torch::full({1024, 1024}, 3.0)));
  rckpt::Result<rckpt::InspectReport> report = rckpt::InspectRckpt(path);
  VERIFY_OK(report.status());
  VERIFY(report->tensors.at(0).origin == rckpt::Device::Cuda(0));
}

// The weight of a file, loaded onto the CPU.
at::Tensor SavedWeight(const std::string& path) {
  rckpt::LoadOptions cpu;
  cpu.map_location = rckpt::MapLocation::To(rckpt::Device::Cpu());
  rckpt::Result<rt::TensorDict> back = rt::LoadTensors(path, "model", cpu);
  if (!back.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), back.status().ToString().c_str());
    return at::Tensor();
  }
  return (*back)["weight"];
}

// A checkpoint built with AddModule carries c10's stream: the core
// rckpt::Save (what an unqualified Save(path, ck) finds) orders its reads
// after the queued work as the adapter's Save does.
void CoreSaveOfAnAdapterCheckpointWaitsForTheCurrentStream() {
  const std::string path = TempPath("core-threes.rckpt");
  torch::nn::Linear net(1024, 1024);
  net->to(kCuda0);
  torch::cuda::synchronize();
  c10::StreamGuard guard(SideStream());
  {
    torch::NoGradGuard no_grad;
    Busy();
    net->weight.fill_(3);  // queued behind Busy()
  }
  rckpt::Checkpoint ck;
  VERIFY_OK(rt::AddModule(&ck, *net));
  VERIFY(static_cast<bool>(ck.caller_stream()));
  VERIFY_OK(rckpt::Save(path, ck));
  at::Tensor w = SavedWeight(path);
  VERIFY(w.defined() && torch::equal(w, torch::full({1024, 1024}, 3.0)));
}

// AsyncSaver (core, and the adapter's SaveAsync): the copies run after the
// queued step, and the snapshot holds the tensors it reads, so dropping the
// checkpoint and reusing the memory at once changes nothing in the file.
void AsyncSavesWaitForTheCurrentStreamAndHoldTheirSources() {
  for (const bool adapter : {false, true}) {
    const std::string path = TempPath(adapter ? "async-adapter.rckpt" : "async-core.rckpt");
    torch::nn::Linear net(1024, 1024);
    net->to(kCuda0);
    torch::cuda::synchronize();
    c10::StreamGuard guard(SideStream());
    rckpt::AsyncSaver saver;
    {
      rckpt::Checkpoint ck;
      {
        torch::NoGradGuard no_grad;
        Busy();
        net->weight.fill_(3);
      }
      // A non-contiguous tensor is added as a contiguous copy, which only the
      // checkpoint (and then the snapshot) owns.
      rt::TensorDict tensors;
      tensors.insert("weight", net->weight.t());
      VERIFY_OK(rt::AddTensors(&ck, "model", tensors));
      VERIFY_OK(adapter ? rt::SaveAsync(saver, path, ck) : saver.Save(path, ck));
    }
    {
      torch::NoGradGuard no_grad;
      // Freed blocks go back to c10's allocator and are reused here.
      for (int i = 0; i < 4; ++i) {
        (void)torch::full({1024, 1024}, 9.0, torch::TensorOptions().device(kCuda0));
      }
      net->weight.fill_(5);
    }
    VERIFY_OK(saver.Wait());
    at::Tensor w = SavedWeight(path);
    VERIFY(w.defined() && torch::equal(w, torch::full({1024, 1024}, 3.0)));
  }
}

void CudaGeneratorsRoundTrip() {
  torch::cuda::manual_seed_all(11);
  rckpt::Checkpoint ck;
  VERIFY_OK(rt::CaptureRng(&ck));
  const rckpt::RngRecord* cuda = ck.FindRng("torch.cuda.0");
  VERIFY(cuda != nullptr);
  if (cuda == nullptr) return;
  VERIFY(cuda->kind == rckpt::RngKind::kTorchCuda);
  VERIFY(cuda->origin == rckpt::Device::Cuda(0));
  const at::Tensor expected = torch::randn({1000}, torch::TensorOptions().device(kCuda0)).cpu();
  torch::randn({5000}, torch::TensorOptions().device(kCuda0));
  rckpt::Result<rt::RngRestoreReport> restored = rt::RestoreRng(ck);
  VERIFY_OK(restored.status());
  if (!restored.ok()) return;
  const rt::RngRestoreReport& report = *restored;
  VERIFY(torch::equal(torch::randn({1000}, torch::TensorOptions().device(kCuda0)).cpu(), expected));
  VERIFY(std::find(report.restored.begin(), report.restored.end(), "torch.cuda.0") !=
        report.restored.end());
}

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(register_module("fc1", torch::nn::Linear(64, 256))),
              fc2(register_module("fc2", torch::nn::Linear(256, 8))) {}
  torch::Tensor forward(torch::Tensor x) {
    return fc2(torch::dropout(torch::relu(fc1(x)), 0.2, is_training()));
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

void Step(Net& net, torch::optim::Optimizer& optimizer) {
  const auto on = torch::TensorOptions().device(kCuda0);
  optimizer.zero_grad();
  torch::mse_loss(net->forward(torch::randn({128, 64}, on)), torch::randn({128, 8}, on))
      .backward();
  optimizer.step();
}

void TrainingOnTheGpuResumesBitIdentically() {
  const std::string path = TempPath("run.rckpt");
  torch::manual_seed(5);
  torch::cuda::manual_seed_all(5);
  Net net;
  net->to(kCuda0);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3).amsgrad(true));
  for (int i = 0; i < 3; ++i) Step(net, adam);
  rckpt::Checkpoint ck;
  VERIFY_OK(rt::AddModule(&ck, *net));
  VERIFY_OK(rt::AddOptimizer(&ck, adam));
  VERIFY_OK(rt::CaptureRng(&ck));
  VERIFY_OK(rt::Save(path, ck));
  for (int i = 0; i < 3; ++i) Step(net, adam);

  Net resumed;
  resumed->to(kCuda0);
  torch::optim::Adam resumed_adam(resumed->parameters(), torch::optim::AdamOptions(0.5));
  rckpt::LoadOptions options;
  options.model_device = rckpt::DeviceSpec::Auto();
  rckpt::Result<rt::Loaded> back = rt::Load(path, options);
  VERIFY_OK(back.status());
  const at::Tensor& exp_avg = back->tensors.at("optimizer.state.0.exp_avg");
  VERIFY(exp_avg.device() == kCuda0);
  VERIFY(back->tensors.at("optimizer.state.0.step").device().is_cpu());  // a host-role counter
  VERIFY_OK(rt::RestoreModule(*back, *resumed));
  VERIFY_OK(rt::RestoreOptimizer(*back, resumed_adam));
  VERIFY_OK(rt::RestoreRng(*back).status());
  for (int i = 0; i < 3; ++i) Step(resumed, resumed_adam);
  auto a = net->named_parameters();
  auto b = resumed->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) VERIFY(torch::equal(a[i].value(), b[i].value()));
}

void CudaSavedLoadsOnTheCpu() {
  const std::string path = TempPath("to-cpu.rckpt");
  torch::nn::Linear gpu(16, 4);
  gpu->to(kCuda0);
  VERIFY_OK(rt::SaveModule(path, *gpu));
  torch::nn::Linear cpu(16, 4);
  VERIFY_OK(rt::LoadInto(path, *cpu));  // each tensor onto its parameter's device
  VERIFY(torch::equal(cpu->weight, gpu->weight.cpu()));
  rckpt::LoadOptions options;
  options.map_location = rckpt::MapLocation::To(rckpt::Device::Cpu());
  rckpt::Result<rt::Loaded> ck = rt::Load(path, options);
  VERIFY_OK(ck.status());
  VERIFY(ck->tensors.at("model.weight").device().is_cpu());
}

}  // namespace

int main(int argc, char** argv) {
  const bool require_gpu = argc > 1 && std::string(argv[1]) == "--require-gpu";
  if (!torch::cuda::is_available()) {
    std::printf("libtorch_gpu_test: SKIPPED: libtorch sees no CUDA device\n");
    return require_gpu ? 1 : 0;
  }
  const std::vector<std::pair<const char*, std::function<void()>>> tests = {
      {"LoadedTensorsAreC10sOwn", LoadedTensorsAreC10sOwn},
      {"LoadIntoWaitsForTheCurrentStream", LoadIntoWaitsForTheCurrentStream},
      {"SaveWaitsForTheCurrentStream", SaveWaitsForTheCurrentStream},
      {"CoreSaveOfAnAdapterCheckpointWaitsForTheCurrentStream",
       CoreSaveOfAnAdapterCheckpointWaitsForTheCurrentStream},
      {"AsyncSavesWaitForTheCurrentStreamAndHoldTheirSources",
       AsyncSavesWaitForTheCurrentStreamAndHoldTheirSources},
      {"CudaGeneratorsRoundTrip", CudaGeneratorsRoundTrip},
      {"TrainingOnTheGpuResumesBitIdentically", TrainingOnTheGpuResumesBitIdentically},
      {"CudaSavedLoadsOnTheCpu", CudaSavedLoadsOnTheCpu},
  };
  for (const auto& [name, test] : tests) {
    const int before = failures;
    try {
      test();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: exception: %s\n", name, e.what());
      ++failures;
    }
    std::printf("%s %s\n", failures == before ? "passed" : "FAILED", name);
  }
  std::printf("libtorch_gpu_test: %s\n", failures == 0 ? "all passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
