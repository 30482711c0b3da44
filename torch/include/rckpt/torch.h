// rckpt::libtorch: checkpoints of libtorch programs, in the layout the Python
// package writes, so that a run moves between Python and C++ with its model,
// its optimizer and its random-number generators.
//
//   // Serve a model Python trained: rckpt.save("model.rckpt", {"model": model.state_dict()})
//   Net net;                                                   // the same architecture
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::LoadInto("model.rckpt", *net));
//
//   // Checkpoint a training run, and resume it bit-identically.
//   rckpt::Checkpoint ck;
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::AddModule(&ck, *net));           // "model"
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::AddOptimizer(&ck, optimizer));  // "optimizer"
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::CaptureRng(&ck));               // torch.cpu, torch.cuda.<i>
//   ck.Tree()["controller"]["step"] = step;
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::Save("run/last.rckpt", ck));
//   ...
//   RCKPT_ASSIGN_OR_RETURN(rckpt::libtorch::Loaded back, rckpt::libtorch::Load("run/last.rckpt"));
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::RestoreModule(back, *net));
//   RCKPT_RETURN_IF_ERROR(rckpt::libtorch::RestoreOptimizer(back, optimizer));
//   RCKPT_ASSIGN_OR_RETURN(rckpt::libtorch::RngRestoreReport rng, rckpt::libtorch::RestoreRng(back));
//
// The layout is Python's: `rckpt.save(path, {"model": model.state_dict(),
// "optimizer": opt.state_dict()}, rng=rckpt.capture_rng())` and the calls
// above read and write the same sections, tensor names, tree and RNG
// records (docs/CPP.md). Tensors are named by their key path, as Python names
// them: "model.fc1.weight", "optimizer.state.0.exp_avg".
//
// Devices. CPU and CUDA tensors are saved from where they are and restored
// as rckpt's placement rules say (docs/RELOCATION.md). On CUDA, torch's
// device handling is used throughout, as the Python package uses it: the
// CUDA tensors a load returns come from c10's caching allocator, every load
// and save is ordered with c10's current stream of each device (no device is
// synchronised), and model_device "auto" is c10's current device. rckpt's
// own CUDA runtime does the copies, in the devices' primary contexts, which
// torch uses too.
//
// Errors are rckpt::Status values naming the tensor, key or record, with the
// codes of status.h; no exception escapes these functions (torch's own are
// caught and returned as a Status: OutOfMemory for an allocation, DeviceError
// for a CUDA failure, InvalidArgument otherwise).
//
// Thread-safety: as rckpt's loads and saves (io.h). A module or optimizer
// must not be used by another thread while it is saved or restored.
#ifndef RCKPT_TORCH_H_
#define RCKPT_TORCH_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/ordered_dict.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/async_save.h"
#include "rckpt/checkpoint.h"
#include "rckpt/options.h"
#include "rckpt/status.h"

namespace torch {
namespace nn {
class Module;
}  // namespace nn
namespace optim {
class Optimizer;
class LRScheduler;
}  // namespace optim
namespace serialize {
class InputArchive;
class OutputArchive;
}  // namespace serialize
}  // namespace torch

namespace rckpt::libtorch {

// Name -> tensor, in order: what Python's state_dict() is, and what
// torch::nn::Module::named_parameters() returns.
using TensorDict = ::torch::OrderedDict<std::string, at::Tensor>;

// ---------------------------------------------------------------------------
// Modules

struct LoadIntoOptions {
  // As load_state_dict(strict=True): every parameter and buffer of the module
  // must have a tensor in the file and the section may hold nothing else.
  // false loads what matches and reports the rest (IncompatibleKeys).
  bool strict = true;
  // The section holding the state_dict: "model" is what Python's
  // rckpt.save(path, {"model": model.state_dict()}) and
  // rckpt.save(path, model.state_dict()) both write.
  std::string section = "model";
  // Key prefixes to take off the file's keys before they are matched, each in
  // turn, as Python's consume_prefix_in_state_dict_if_present does: a key
  // that starts with the prefix loses it, the others stay. {"module.",
  // "_orig_mod."} reads a state_dict saved from a DDP-wrapped module and from
  // a torch.compile'd one ("module._orig_mod.fc1.weight" -> "fc1.weight").
  // Two keys that become one are InvalidArgument, naming both.
  std::vector<std::string> strip_prefixes;
  // Threads, checksums, the file system, progress (rckpt's LoadOptions; its
  // placement options do not apply: each tensor goes to the device of its
  // parameter or buffer).
  LoadOptions load;
};

// What strict = false let through, as Python's load_state_dict returns it:
// keys of the module with no tensor in the file, and keys of the file's
// section that the module does not have.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// Restores every parameter and buffer of `module` (recursively, by its dotted
// name, "encoder.0.weight") from the section "model" of the file at `path`:
// a file Python saved with rckpt.save(path, {"model": model.state_dict()})
// or rckpt.save(path, model.state_dict()), or SaveModule's. Each tensor is
// read straight into the parameter's memory, on the device the parameter is
// on (CPU or CUDA). Names, dtypes and shapes are all checked before the first
// byte is written: InvalidArgument lists every missing key, unexpected key
// and mismatch together, and the module is unchanged. (A read that fails part
// way, on a damaged chunk, leaves the parameters read before it restored.)
// Otherwise the errors of rckpt::LoadInto.
Status LoadInto(const std::string& path, ::torch::nn::Module& module);
// With options: strict = false loads the keys that match and, when `keys` is
// not null, reports the others there (an error is still returned for a key
// whose dtype or shape does not match). NotFound when the file has no such
// section.
Status LoadInto(const std::string& path, ::torch::nn::Module& module,
                const LoadIntoOptions& options, IncompatibleKeys* keys = nullptr);

// Writes the module's parameters and buffers in the layout of
// rckpt.save(path, {"model": model.state_dict()}): `rckpt.load(path)["model"]`
// in Python is the module's state_dict, keys in state_dict() order. A tensor
// registered under two names (tied weights) is stored once, as Python does.
// Atomic as rckpt::Save; ordered with c10's current stream on CUDA.
Status SaveModule(const std::string& path, const ::torch::nn::Module& module,
                  const SaveOptions& options = {});

// Adds the module's state_dict to `ck` as section `section` (tensors shared,
// not copied: keep the module unchanged until the checkpoint is saved).
// InvalidArgument when `ck` already has tensors of that section.
Status AddModule(Checkpoint* ck, const ::torch::nn::Module& module,
                 std::string_view section = "model");

// ---------------------------------------------------------------------------
// Name -> tensor maps

// Writes `tensors` as Python's rckpt.save(path, tensors) writes a dict of
// tensors (section "model", each tensor "model.<key>"): rckpt.load(path) in
// Python gives that dict back. Unsupported, naming the key, for a tensor
// rckpt cannot store (sparse, quantized, on another device than cpu or cuda,
// of a dtype it lacks).
Status SaveTensors(const std::string& path, const TensorDict& tensors,
                   const SaveOptions& options = {});

// Reads the tensors of `section` (by default "model": a dict saved with
// SaveTensors or rckpt.save(path, tensors), or the state_dict of
// rckpt.save(path, {"model": model.state_dict()})), keyed as the section's
// dict is ("fc1.weight"; nested dicts joined with "."), placed by `options`
// as rckpt::Load places them (only that section is read). NotFound when the
// file has no such section (as from every call here that reads one);
// InvalidArgument when the section holds something other than tensors
// (naming the key).
Result<TensorDict> LoadTensors(const std::string& path, std::string_view section = "model",
                               const LoadOptions& options = {});

// Adds `tensors` to `ck` as section `section`, keyed as given (tensors
// shared, not copied). The tree gets the section's dict, as Python's save
// writes it.
Status AddTensors(Checkpoint* ck, std::string_view section, const TensorDict& tensors);

// ---------------------------------------------------------------------------
// Loading and saving whole checkpoints with torch's devices

// rckpt::Save with c10's current stream of each device as the caller's
// stream (unless options.caller_stream is set).
//
// A checkpoint that AddModule, AddTensors or AddOptimizer gave a CUDA tensor
// carries c10's current stream as its own (Checkpoint::caller_stream), so
// the core rckpt::Save and rckpt::AsyncSaver::Save order its reads the same
// way: whichever Save it reaches, a CUDA tensor is read after the work
// queued on c10's current stream of its device at the call (the optimizer
// step before it), and no device is synchronised.
Status Save(const std::string& path, const Checkpoint& ck, SaveOptions options = {});

// saver.Save (rckpt/async_save.h) with c10's current stream of each device
// as the caller's stream (unless options.caller_stream is set): returns once
// the checkpoint is copied (host tensors) or its device-to-host copies are
// queued after the work on that stream (CUDA tensors), and writes the file
// on the saver's thread. The snapshot holds the CUDA tensors until their
// copies are done, so `ck` may be dropped at once; the tensors must not be
// changed before saver.WaitSnapshot() returns (or the next step's stream is
// ordered after the copies). Errors as saver.Save's.
Status SaveAsync(AsyncSaver& saver, const std::string& path, const Checkpoint& ck,
                 SaveOptions options = {}, AsyncSaver::DoneCallback done = nullptr);

// A checkpoint loaded with torch's devices: rckpt's Checkpoint (tree, RNG
// records, metadata) and each of its tensors as an at::Tensor sharing the
// loaded memory. CUDA tensors are the very tensors c10's caching allocator
// gave the load; host tensors own the engine's buffer or point into the
// private mapping of the file (LoadOptions::map_file), which they keep alive.
struct Loaded {
  Checkpoint checkpoint;
  std::map<std::string, at::Tensor, std::less<>> tensors;  // by name in the file
};

// rckpt::Load with torch's devices: unless the options set them, CUDA tensors
// are allocated by c10's caching allocator (device_allocator), the load is
// ordered with c10's current stream (caller_stream) and model_device "auto"
// is c10's current device (auto_device). DeviceUnavailable when rckpt and
// torch disagree about the GPUs, naming both counts. Tensors placed on an
// emulated device (LoadOptions::runtime from NewEmulatedRuntime) come back as
// CPU tensors. Otherwise the errors of rckpt::Load.
Result<Loaded> Load(const std::string& path, LoadOptions options = {});

// The tensors of one section of a loaded checkpoint, keyed as in Python
// (LoadTensors). NotFound when the checkpoint has no such section;
// InvalidArgument, naming the keys, when it holds values that are not
// tensors.
Result<TensorDict> SectionTensors(const Loaded& ck, std::string_view section);

// Copies the section's tensors into `module`'s parameters and buffers, with
// LoadInto's checks and options (options.load is not used): the module is
// unchanged when they fail. NotFound when the checkpoint has no such section.
Status RestoreModule(const Loaded& ck, ::torch::nn::Module& module,
                     const LoadIntoOptions& options = {}, IncompatibleKeys* keys = nullptr);

// ---------------------------------------------------------------------------
// Optimizers: torch::optim::Adam, AdamW and SGD

// Adds the optimizer's state as section `section`, in the layout of Python's
// optimizer.state_dict(): {"state": {index: {"step", "exp_avg", ...}},
// "param_groups": [{"lr", "betas", ..., "params": [indices]}]}, parameters
// numbered across the groups in order, "step" a 0-d float32 CPU tensor, the
// keys Python's optimizer has and libtorch's does not at their defaults
// ("maximize": False, "foreach": None, ...). Python's optimizer.load_state_dict
// resumes from it. Unsupported for another optimizer class.
Status AddOptimizer(Checkpoint* ck, const ::torch::optim::Optimizer& optimizer,
                    std::string_view section = "optimizer");

struct RestoreOptimizerOptions {
  // The section holding the optimizer's state_dict.
  std::string section = "optimizer";
  // Adam and AdamW keep the same state and differ in how weight_decay is
  // applied: a file whose groups say decoupled_weight_decay=False (Adam's,
  // as Python's Adam and AddOptimizer write it) restored into a
  // torch::optim::AdamW, or True (AdamW's) into a torch::optim::Adam, is
  // InvalidArgument unless this is true. A group without the key (older
  // torch wrote none, for either class) cannot tell, and restores into
  // either as the optimizer's own class, as Python's load_state_dict does.
  bool accept_other_adam_variant = false;
};

// Restores an optimizer's state from section `section` (Python's
// optimizer.state_dict() or AddOptimizer's), as Python's load_state_dict
// does: the groups' hyper-parameters are set from the file, saved parameter
// i is the i-th parameter of the optimizer's groups in order, and the state
// becomes the file's. State tensors are copied, never shared with
// `ck.tensors`: into the optimizer's own state tensor of that parameter and
// field when it has one of the same shape on the parameter's device (as
// RestoreModule copies into parameters), else into a new tensor on the
// parameter's device (in its dtype, for a floating-point parameter); two
// optimizers restored from one Loaded share nothing, and `ck` stays as it
// was loaded. State of parameters the file has none for is dropped.
// Everything is checked before the optimizer is touched: InvalidArgument
// naming the entry when the groups or their sizes differ, a state tensor's
// shape is not its parameter's, a field is not the optimizer's, or the file
// asks for what libtorch's optimizer does not do (maximize=True; Adam's
// state into an AdamW or AdamW's into an Adam, unless
// options.accept_other_adam_variant); keys libtorch has no place for
// (foreach, fused, capturable, differentiable, and initial_lr of Python's LR
// schedulers) are not kept. NotFound without the section; Unsupported for
// another optimizer class.
Status RestoreOptimizer(const Loaded& ck, ::torch::optim::Optimizer& optimizer,
                        const RestoreOptimizerOptions& options);
// RestoreOptimizer with options.section = `section`.
Status RestoreOptimizer(const Loaded& ck, ::torch::optim::Optimizer& optimizer,
                        std::string_view section = "optimizer");

// ---------------------------------------------------------------------------
// LR schedulers, and anything libtorch writes to an archive

// Adds the step count of a libtorch LR scheduler (torch::optim::StepLR,
// ReduceLROnPlateau's base, or a user's subclass of LRScheduler) as section
// `section` of the tree, in the keys of Python's scheduler.state_dict():
// {"last_epoch": n, "_step_count": n + 1} after n calls of step(), so that
// Python's scheduler.load_state_dict resumes from it too. The learning rates
// themselves are the optimizer's (AddOptimizer, RestoreOptimizer).
// InvalidArgument when `ck` has the section already.
Status AddLRScheduler(Checkpoint* ck, const ::torch::optim::LRScheduler& scheduler,
                      std::string_view section = "lr_scheduler");

// Sets the scheduler's step count from section `section` (AddLRScheduler's,
// or Python's scheduler.state_dict(), by its last_epoch), so that its next
// step() changes the learning rates when the saved run's would have.
// NotFound without the section; InvalidArgument when it has no last_epoch
// that is an int from 0 to 2^32 - 1.
Status RestoreLRScheduler(const Loaded& ck, ::torch::optim::LRScheduler& scheduler,
                          std::string_view section = "lr_scheduler");

// The extension point: adds what a libtorch object wrote to `archive` with
// its save(OutputArchive&) (a torch::data sampler's position, an optimizer
// this adapter has no layout for, such as RMSprop or Adagrad, a
// user's own module or optimizer state) as section `section` of the tree,
// one bytes value, inside the same atomic file as the rest. Only libtorch
// reads it back (ReadArchive): Python sees the bytes. InvalidArgument when
// `ck` has the section already.
Status AddArchive(Checkpoint* ck, std::string_view section,
                  ::torch::serialize::OutputArchive& archive);

// Loads section `section` (AddArchive's) into `archive`, for the object's
// load(InputArchive&). NotFound without the section; InvalidArgument when it
// is not AddArchive's bytes, or libtorch cannot read them.
Status ReadArchive(const Loaded& ck, std::string_view section,
                   ::torch::serialize::InputArchive* archive);

// ---------------------------------------------------------------------------
// Random-number generators

// Generators named by the caller, beside the default ones.
using GeneratorMap = std::map<std::string, at::Generator, std::less<>>;

// Adds the state of torch's default CPU generator ("torch.cpu", kind
// torch_cpu), of the default generator of every CUDA device torch sees
// ("torch.cuda.<i>", kind torch_cuda, origin cuda:<i>) and of each generator
// of `generators` ("torch.<name>") to `ck` as RNG records: the names, kinds
// and bytes of Python's rckpt.capture_rng(). InvalidArgument when `ck`
// already has a record of one of these names.
Status CaptureRng(Checkpoint* ck, const GeneratorMap& generators = {});

// What RestoreRng did: the records restored and the ones skipped.
struct RngRestoreReport {
  std::vector<std::string> restored;
  std::vector<std::string> skipped;
};

// Restores what CaptureRng (or Python's capture_rng) saved, by the rules of
// Python's restore_rng, and returns what it restored and what it skipped
// (records in the checkpoint's order): the default CPU generator from
// "torch.cpu", or from the names a Trainer rng_state.pth or accelerate's
// random_states_<i>.pkl is imported as, "cpu" and "torch_manual_seed" (kind
// torch_cpu); device i's default generator from "torch.cuda.<i>", "cuda",
// "cuda.<i>" or "torch_cuda_manual_seed.<i>" of origin cuda:<i> when torch
// sees device i, skipped otherwise; "torch.<name>" into generators[name],
// skipped when not given; Python's and NumPy's records are skipped (C++ has
// no such generators), as is any other name. A checkpoint with no record
// for torch's generators restores nothing and says so (restored is empty):
// check it where a resume must be bit-identical. Every record is checked
// before the first generator is set: Corruption for a malformed state,
// InvalidArgument for a state of another kind or device than its
// generator's; nothing is restored on error.
Result<RngRestoreReport> RestoreRng(const Checkpoint& ck, const GeneratorMap& generators = {});
// RestoreRng of `ck.checkpoint`.
Result<RngRestoreReport> RestoreRng(const Loaded& ck, const GeneratorMap& generators = {});

}  // namespace rckpt::libtorch

#endif  // RCKPT_TORCH_H_
