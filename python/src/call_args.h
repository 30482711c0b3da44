// What the save and load calls of both extension modules (rckpt._core,
// rckpt._distributed) make of their arguments: the runtime, the save options, the
// placement options, RNG records, and the bridge from the engine's progress
// callback to Python.
//
// Thread-safety: call with the GIL held, except where a comment says
// otherwise.
#ifndef RCKPT_PYTHON_SRC_CALL_ARGS_H_
#define RCKPT_PYTHON_SRC_CALL_ARGS_H_

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"
#include "rckpt/runtime.h"

namespace rckpt::python {

namespace nb = nanobind;

// Bridges the engine's progress callback (called on the calling thread while
// the GIL is released) to Python: Ctrl-C, an exception in the user's
// callback, or the callback returning False cancel the operation; the
// Python exception is raised once the engine has cleaned up.
class Progress {
 public:
  explicit Progress(nb::object callback) : callback_(std::move(callback)) {}

  // Valid while this object lives; takes the GIL itself.
  ProgressCallback Callback();

  // With the GIL held: raises the pending Python exception, if any.
  void RaiseIfPending();

 private:
  nb::object callback_;
  std::optional<nb::python_error> error_;
};

// The runtime of one call: N emulated devices, or the default one (nullptr).
// InvalidArgument for a negative N.
std::shared_ptr<DeviceRuntime> RuntimeFor(int emulate_devices);

// The options of a save call: `options` (rckpt._core.SaveOptions, which the
// Python layer built and checked) with this call's runtime and progress;
// `progress` must outlive the save.
SaveOptions SaveOptionsOf(const SaveOptions& options, DeviceRuntime* runtime, Progress* progress);

// The options every load call shares (placement, sections and map_file are
// set by the caller); `progress` must outlive the load.
LoadOptions LoadOptionsOf(bool verify, int threads, DeviceRuntime* runtime, Progress* progress);

class TorchDeviceAllocator;

// A call on torch's CUDA devices (`runtime` null: the default runtime; for
// emulated devices nothing changes): the engine's device work is ordered
// with torch's current stream of each device (no device-wide synchronise),
// and for a load, the CUDA tensors it returns come from `alloc` (torch's
// caching allocator) and model_device "auto" is torch.cuda.current_device().
void UseTorchForDevices(DeviceRuntime* runtime, TorchDeviceAllocator* alloc, LoadOptions* o);
void UseTorchForDevices(DeviceRuntime* runtime, SaveOptions* o);

// The RngKind named `name` ("torch_cpu", ...); InvalidArgument otherwise.
RngKind RngKindOf(const std::string& name);

// Copies a dict of str -> str into the checkpoint's metadata.
void AddMetadata(nb::dict metadata, Checkpoint* ck);

// Adds the records of RngState.records() (tuples name, kind, origin, bytes)
// to `ck`. InvalidArgument for an unknown kind or device.
void AddRngRecords(nb::handle records, Checkpoint* ck);

// The checkpoint a single-process save of `state` writes: its sections,
// tensors and tree (BuildCheckpoint), its RNG records and its metadata.
// `keep_alive` holds the Python objects whose memory its tensors view;
// `cuda_tensors`, when given, receives the state's CUDA tensors
// (BuildCheckpoint).
Checkpoint CheckpointToSave(nb::handle state, nb::handle rng, nb::dict metadata,
                            nb::handle origin, std::vector<nb::object>* keep_alive,
                            std::vector<nb::object>* cuda_tensors = nullptr);

// The inverse: RNG records as tuples (name, kind, origin, bytes).
nb::list RngTuples(const std::vector<RngRecord>& records);

// Fills the placement options from the Python arguments (already normalised
// to strings, dicts and callables by the Python layer). A map_location
// callable runs with the GIL taken; its first exception is kept in
// `*callback_error` (which must outlive the load) and the tensor is placed
// as stored.
void SetPlacement(nb::handle map_location, std::optional<std::string> model_device, LoadOptions* o,
                  std::optional<nb::python_error>* callback_error);

// With the GIL held: raises the map_location callable's exception, if any.
void RaiseCallbackError(std::optional<nb::python_error>* callback_error);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_CALL_ARGS_H_
