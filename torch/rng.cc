// Random-number generators: at::Generator states as the RNG records of
// Python's rckpt.capture_rng().

#include <cstring>
#include <optional>

#include "bridge.h"

namespace rckpt::libtorch {
namespace {

constexpr std::string_view kTorchPrefix = "torch.";
constexpr std::string_view kCudaPrefix = "torch.cuda.";

// The names besides "torch.cpu" and "torch.cuda.<i>" under which Python's
// restore_rng restores the default generators (python/rckpt/rng.py): those a
// Trainer rng_state.pth and accelerate's random_states_<i>.pkl are imported
// as, and a state dict's "cpu" / "cuda" entries.
bool IsCpuAlias(const RngRecord& r) {
  return r.kind == RngKind::kTorchCpu && (r.name == "cpu" || r.name == "torch_manual_seed");
}

bool IsDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool IsCudaAlias(const RngRecord& r) {
  if (!r.origin.is_cuda() || (r.kind != RngKind::kTorchCuda && r.kind != RngKind::kOpaque)) {
    return false;
  }
  if (r.name == "cuda") return true;
  for (std::string_view prefix : {"cuda.", "torch_cuda_manual_seed."}) {
    if (r.name.starts_with(prefix) && IsDigits(std::string_view(r.name).substr(prefix.size()))) {
      return true;
    }
  }
  return false;
}

at::Generator DefaultGenerator(c10::DeviceType type, int index) {
  return at::globalContext().defaultGenerator(
      c10::Device(type, static_cast<c10::DeviceIndex>(index)));
}

int TorchCudaCount() {
  return ::torch::cuda::is_available() ? static_cast<int>(::torch::cuda::device_count()) : 0;
}

// A generator's state as an RNG record, named and typed as Python's
// capture_rng types it: torch_cpu, torch_cuda (16 bytes: seed and offset),
// or opaque for the CUDA states of other sizes older torch wrote.
Result<RngRecord> Capture(std::string name, at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor state = generator.get_state().contiguous();
  RngRecord record;
  record.name = std::move(name);
  record.bytes.resize(static_cast<size_t>(state.numel()));
  std::memcpy(record.bytes.data(), state.data_ptr(), record.bytes.size());
  const c10::Device device = generator.device();
  if (device.is_cpu()) {
    record.kind = RngKind::kTorchCpu;
  } else if (device.is_cuda()) {
    record.kind = record.bytes.size() == 16 ? RngKind::kTorchCuda : RngKind::kOpaque;
    record.origin = Device::Cuda(device.has_index() ? device.index() : 0);
  } else {
    return Status::Unsupported("generator '" + record.name + "' is a " + device.str() +
                               " generator; rckpt captures cpu and cuda generators");
  }
  RCKPT_RETURN_IF_ERROR(ValidateRngState(record.kind, record.bytes));
  return record;
}

// Whether `record` can be set into `generator`: a CPU generator takes a
// torch_cpu state, a CUDA one the 16 bytes of torch_cuda (or the 8 of a
// seed alone, as torch accepts).
Status CheckRestorable(const RngRecord& record, const at::Generator& generator) {
  const c10::Device device = generator.device();
  const std::string kind(RngKindName(record.kind));
  if (device.is_cpu()) {
    if (record.kind != RngKind::kTorchCpu) {
      return Status::InvalidArgument("RNG record '" + record.name + "' holds a " + kind +
                                     " state, but its generator is a CPU generator, which takes "
                                     "a torch_cpu state");
    }
  } else if (device.is_cuda()) {
    const size_t n = record.bytes.size();
    const bool cuda_state = record.kind == RngKind::kTorchCuda ||
                            (record.kind == RngKind::kOpaque && (n == 8 || n == 16));
    if (!cuda_state) {
      return Status::InvalidArgument(
          "RNG record '" + record.name + "' holds a " + kind + " state of " + std::to_string(n) +
          " bytes, but its generator is a CUDA generator, which takes 16 bytes (seed, offset)" +
          (n == 816 ? "; 816 bytes is the layout of torch before 2.1" : ""));
    }
  } else {
    return Status::InvalidArgument("RNG record '" + record.name + "': its generator is a " +
                                   device.str() + " generator; rckpt restores cpu and cuda "
                                   "generators");
  }
  return ValidateRngState(record.kind, record.bytes)
      .WithContext("RNG record '" + record.name + "'");
}

Status CaptureInto(Checkpoint* ck, const GeneratorMap& generators) {
  if (ck == nullptr) return Status::InvalidArgument("CaptureRng: the checkpoint is null");
  std::vector<RngRecord> records;
  RCKPT_ASSIGN_OR_RETURN(RngRecord cpu, Capture("torch.cpu", DefaultGenerator(c10::kCPU, -1)));
  records.push_back(std::move(cpu));
  for (int i = 0, n = TorchCudaCount(); i < n; ++i) {
    RCKPT_ASSIGN_OR_RETURN(RngRecord cuda, Capture(std::string(kCudaPrefix) + std::to_string(i),
                                                   DefaultGenerator(c10::kCUDA, i)));
    records.push_back(std::move(cuda));
  }
  for (const auto& [name, generator] : generators) {
    if (!generator.defined()) {
      return Status::InvalidArgument("CaptureRng: generators['" + name + "'] is undefined");
    }
    RCKPT_ASSIGN_OR_RETURN(RngRecord named, Capture(std::string(kTorchPrefix) + name, generator));
    records.push_back(std::move(named));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string& name = records[i].name;
    bool twice = false;
    for (size_t j = 0; j < i; ++j) twice = twice || records[j].name == name;
    if (twice || ck->FindRng(name) != nullptr || ck->FindTensor(name) != nullptr) {
      return Status::InvalidArgument("CaptureRng: the RNG record name '" + name + "' is " +
                                     (twice ? "the name of a default generator's record"
                                            : "taken in the checkpoint"));
    }
  }
  for (RngRecord& r : records) {
    RCKPT_RETURN_IF_ERROR(ck->AddRng(r.name, r.kind, r.bytes, r.origin));
  }
  return Status::Ok();
}

Result<RngRestoreReport> RestoreFrom(const Checkpoint& ck, const GeneratorMap& generators) {
  const int cuda_count = TorchCudaCount();
  std::vector<std::pair<at::Generator, const RngRecord*>> actions;
  RngRestoreReport out;
  for (const RngRecord& r : ck.rng()) {
    std::optional<at::Generator> target;
    if (r.name == "torch.cpu" || IsCpuAlias(r)) {
      target = DefaultGenerator(c10::kCPU, -1);
    } else if ((r.name.starts_with(kCudaPrefix) && r.origin.is_cuda()) || IsCudaAlias(r)) {
      if (r.origin.index < cuda_count) target = DefaultGenerator(c10::kCUDA, r.origin.index);
    } else if (r.name.starts_with(kTorchPrefix)) {
      auto it = generators.find(std::string_view(r.name).substr(kTorchPrefix.size()));
      if (it != generators.end() && it->second.defined()) target = it->second;
    }
    if (!target) {
      out.skipped.push_back(r.name);
      continue;
    }
    RCKPT_RETURN_IF_ERROR(CheckRestorable(r, *target));
    actions.emplace_back(*target, &r);
  }
  for (auto& [generator, record] : actions) {
    at::Tensor state = at::empty({static_cast<int64_t>(record->bytes.size())}, at::kByte);
    std::memcpy(state.data_ptr(), record->bytes.data(), record->bytes.size());
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
    out.restored.push_back(record->name);
  }
  return out;
}

}  // namespace

Status CaptureRng(Checkpoint* ck, const GeneratorMap& generators) {
  return Guard("CaptureRng", [&] { return CaptureInto(ck, generators); });
}

Result<RngRestoreReport> RestoreRng(const Checkpoint& ck, const GeneratorMap& generators) {
  return Guard("RestoreRng", [&] { return RestoreFrom(ck, generators); });
}

Result<RngRestoreReport> RestoreRng(const Loaded& ck, const GeneratorMap& generators) {
  return RestoreRng(ck.checkpoint, generators);
}

}  // namespace rckpt::libtorch
