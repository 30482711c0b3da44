// Serving a model Python trained, from a libtorch program: the weights come
// from a file Python wrote with rckpt.save(path, {"model": model.state_dict()}),
// read straight into the module's parameters by rckpt::libtorch::LoadInto, and
// the outputs go back to Python as a file rckpt.load reads (docs/CPP.md).
//
//   serve MODEL.rckpt INPUTS.rckpt OUTPUTS.rckpt [--resave FILE] [--device cpu|cuda]
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "net.h"
#include "rckpt/torch.h"

namespace {

constexpr char kUsage[] =
    "usage: serve MODEL.rckpt INPUTS.rckpt OUTPUTS.rckpt [--resave FILE] [--device cpu|cuda]\n"
    "\n"
    "Loads the weights of the network of net.h from MODEL.rckpt (section \"model\", as\n"
    "Python's rckpt.save(path, {\"model\": model.state_dict()}) writes it), runs it in\n"
    "eval mode on the tensor \"x\" of INPUTS.rckpt (rckpt.save(path, {\"x\": x})) and\n"
    "writes {\"y\": output} to OUTPUTS.rckpt, which rckpt.load(path) in Python reads.\n"
    "\n"
    "  --resave FILE   also write the module back with rckpt::libtorch::SaveModule\n"
    "  --device DEV    cpu (default) or cuda (c10's current device)\n";

int Fail(const std::string& what, const rckpt::Status& status) {
  std::fprintf(stderr, "serve: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

int Serve(const std::vector<std::string>& files, const std::string& resave,
          const torch::Device& device) {
  Net net;
  net->to(device);
  // Every parameter and buffer, by name, checked before the first byte is read.
  rckpt::Status loaded = rckpt::libtorch::LoadInto(files[0], *net);
  if (!loaded.ok()) return Fail(files[0], loaded);

  rckpt::Result<rckpt::libtorch::TensorDict> inputs = rckpt::libtorch::LoadTensors(files[1]);
  if (!inputs.ok()) return Fail(files[1], inputs.status());
  const at::Tensor* x = inputs->find("x");
  if (x == nullptr) return Fail(files[1], rckpt::Status::NotFound("no tensor \"x\""));

  net->eval();
  torch::NoGradGuard no_grad;
  rckpt::libtorch::TensorDict outputs;
  outputs.insert("y", net->forward(x->to(device)));
  rckpt::Status saved = rckpt::libtorch::SaveTensors(files[2], outputs);
  if (!saved.ok()) return Fail(files[2], saved);
  std::printf("wrote %s: y of shape [%lld, %lld]\n", files[2].c_str(),
              static_cast<long long>(outputs["y"].size(0)),
              static_cast<long long>(outputs["y"].size(1)));

  if (!resave.empty()) {
    rckpt::Status written = rckpt::libtorch::SaveModule(resave, *net);
    if (!written.ok()) return Fail(resave, written);
    std::printf("wrote %s: the model's state_dict\n", resave.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::string resave;
  std::string device = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--resave" || arg == "--device") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "serve: %s needs a value\n\n%s", argv[i], kUsage);
        return 2;
      }
      (arg == "--resave" ? resave : device) = argv[++i];
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "serve: unknown option %s\n\n%s", argv[i], kUsage);
      return 2;
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.size() != 3) {
    std::fprintf(stderr, "serve: expected MODEL INPUTS OUTPUTS, got %zu file(s)\n\n%s",
                 files.size(), kUsage);
    return 2;
  }
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "serve: --device %s: expected cpu or cuda\n", device.c_str());
    return 2;
  }
  try {
    return Serve(files, resave, device == "cuda" ? torch::Device(torch::kCUDA) : torch::kCPU);
  } catch (const std::exception& e) {  // libtorch's own (rckpt::libtorch returns a Status)
    std::fprintf(stderr, "serve: %s\n", e.what());
    return 1;
  }
}
