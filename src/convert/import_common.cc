#include "convert/import_common.h"

#include "core/rng_layout.h"

#include <algorithm>
#include <map>
#include <cstring>
#include <set>

#include "convert/bytes.h"

namespace rckpt::convert {
namespace {

bool IsNumber(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const std::map<std::string, std::string, std::less<>>& SectionTable() {
  static const auto* t = new std::map<std::string, std::string, std::less<>>{
      {"model", "model"},
      {"state_dict", "model"},
      {"model_state_dict", "model"},
      {"optimizer", "optimizer"},
      {"optimizer_state_dict", "optimizer"},
      {"optimizer_states", "optimizer"},
      {"metric_tracker", "metrics"},
      {"metrics", "metrics"},
      {"controller", "controller"},
      {"scheduler", "scheduler"},
      {"lr_scheduler", "scheduler"},
      {"lr_schedulers", "scheduler"},
      {"database", "database"},
      {"loss", "loss"},
      {"evaluator", "evaluator"},
  };
  return *t;
}

// Keys whose uint8 1-D tensors hold torch generator states (the last key of
// the path, list indices skipped). Sources: HF Trainer ("cpu", "cuda"),
// Lightning ("torch", "torch.cuda"), accelerate's random_states_<i>.pkl
// ("torch_manual_seed", "torch_cuda_manual_seed"), Megatron and hand-written
// loops.
const std::set<std::string, std::less<>> kRngKeys = {
    "torch_rng_state", "rng_state",  "rng_states",     "cpu_rng_state", "cuda_rng_state",
    "cuda_rng_states", "torch_cuda_rng_state", "torch_cuda", "cpu", "cuda", "torch",
    "torch.cuda", "rng", "cuda_rng", "cpu_rng", "torch_manual_seed",
    "torch_cuda_manual_seed"};
// Parents that make any child key an RNG candidate ({"rng_state": {"cpu": t}}).
const std::set<std::string, std::less<>> kRngParents = {"rng_state", "rng_states", "rng",
                                                        "rng_states_all"};

}  // namespace

bool IsKnownObjectClass(std::string_view c) {
  return c == "collections.OrderedDict" || c == "torch.Size" || c == "torch.device" ||
         c == "torch.dtype" || c == "torch.layout" || c == "builtins.complex" ||
         c == "builtins.bytearray";
}

std::string SectionForPath(const std::vector<std::string>& path, bool root_is_map,
                           bool plain_state_dict, const ImportOptions& options) {
  if (path.empty() || !root_is_map) return "data";
  const std::string& top = path[0];
  if (auto it = options.section_overrides.find(top); it != options.section_overrides.end()) {
    return it->second;
  }
  if (plain_state_dict) return "model";
  if (top == "controller" && path.size() > 1 &&
      (path[1] == "optimizer" || path[1] == "optimizer_state_dict")) {
    return "optimizer";
  }
  if (auto it = SectionTable().find(top); it != SectionTable().end()) return it->second;
  return top;
}

std::string JoinPath(const std::vector<std::string>& path) {
  if (path.empty()) return "tensor";
  std::string s;
  for (const std::string& p : path) {
    if (!s.empty()) s += '.';
    s += p;
  }
  return s;
}

std::optional<RngGuess> DetectRng(const std::vector<std::string>& path, uint64_t nbytes,
                                  const ImportOptions& options,
                                  std::vector<std::string>* warnings) {
  std::string full = JoinPath(path);
  int index = -1;
  size_t last = path.size();
  while (last > 0 && IsNumber(path[last - 1])) --last;
  if (last < path.size() && path[last].size() < 6) index = std::stoi(path[last]);
  std::string key = last > 0 ? path[last - 1] : "";
  bool user = std::find(options.rng_keys.begin(), options.rng_keys.end(), full) !=
                  options.rng_keys.end() ||
              (!key.empty() && std::find(options.rng_keys.begin(), options.rng_keys.end(),
                                         key) != options.rng_keys.end());
  bool known = kRngKeys.count(key) > 0;
  for (size_t i = 0; i + 1 < last && !known; ++i) known = kRngParents.count(path[i]) > 0;
  if (!user && !known) return std::nullopt;
  bool cuda_key = key.find("cuda") != std::string::npos;
  if (nbytes == kTorchCpuStateBytes) return RngGuess{RngKind::kTorchCpu, Device::Cpu()};
  if (nbytes == kTorchCudaStateBytes) return RngGuess{RngKind::kTorchCuda, Device::Cuda(index < 0 ? 0 : index)};
  if (user) {
    return RngGuess{RngKind::kOpaque, cuda_key ? Device::Cuda(index < 0 ? 0 : index)
                                               : Device::Cpu()};
  }
  std::string hint = nbytes == 5048   ? " (a pre-1.3 torch CPU state)"
                     : nbytes == 816 ? " (a torch <= 2.0 CUDA state)"
                                     : "";
  warnings->push_back("'" + full + "' is a uint8 tensor under an RNG key but its " +
                      std::to_string(nbytes) + " bytes match no known generator layout" +
                      hint + "; kept as a tensor (use --rng-key to import it as opaque RNG)");
  return std::nullopt;
}

std::string UniqueName(const Checkpoint& ck, const std::string& name,
                       std::vector<std::string>* warnings) {
  if (!ck.FindTensor(name) && !ck.FindRng(name)) return name;
  for (int i = 2;; ++i) {
    std::string n = name + "~" + std::to_string(i);
    if (!ck.FindTensor(n) && !ck.FindRng(n)) {
      warnings->push_back("two keys map to the name '" + name + "'; the second is named '" +
                          n + "'");
      return n;
    }
  }
}

}  // namespace rckpt::convert
