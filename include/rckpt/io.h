// Saving and loading checkpoints.
//
// Save writes one self-contained .rckpt file atomically: a temporary file in
// the same directory, fsync, rename over the path, fsync of the directory.
// A failed or cancelled save removes its temporary and leaves any previous
// file at the path untouched.
//
// Every load validates its options first (before any file is opened), then
// opens the file in verify-then-trust order (footer, manifest checksum,
// FlatBuffers verifier, semantic validator), places each tensor by the
// relocation policy (options.h) and restores it; RNG records and host-role
// tensors always go to host memory. A load returns a complete checkpoint or
// an error, never a partial one.
//
// Thread-safety: all functions may be called concurrently on different
// checkpoints and on the same file.
#ifndef RCKPT_IO_H_
#define RCKPT_IO_H_

#include <string>
#include <vector>

#include "rckpt/checkpoint.h"
#include "rckpt/options.h"

namespace rckpt {

// Saves `ck` to `path`. Errors: InvalidArgument (bad options, e.g. a
// non-power-of-two alignment), IoError (write/sync/rename failed, or
// cancelled), DeviceError / DeviceUnavailable (reading a device tensor).
Status Save(const std::string& path, const Checkpoint& ck,
            const SaveOptions& options = {});

// Loads the checkpoint at `path`. Errors: InvalidArgument (map_location and
// model_device both given; unknown section names), NotFound, Corruption
// (any structural or checksum failure), Unsupported (newer major version),
// DeviceUnavailable (a target device that does not exist), DeviceError,
// OutOfMemory.
Result<Checkpoint> Load(const std::string& path, const LoadOptions& options = {});

// A caller-owned destination for LoadInto.
struct LoadTarget {
  std::string name;
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device;  // the tensor is restored here, whatever its origin
};

// Restores the named tensors into caller-owned buffers (as torch's
// load_state_dict copies into existing parameters). Before the first byte is
// written, every target's name, dtype and shape is checked against the file;
// InvalidArgument lists all missing names, unexpected names and mismatches
// together. `strict` = false ignores tensors of the file without a target.
// map_location / model_device do not apply (each target's device decides).
Status LoadInto(const std::string& path, const std::vector<LoadTarget>& targets,
                const LoadOptions& options = {}, bool strict = true);

// Reads only the named tensors, each placed where Load with `options` would
// place it (options.map_location / model_device; sections do not apply),
// without reading the rest of the file; returned in the order asked for.
// NotFound naming every unknown name; InvalidArgument for a name asked for
// twice; otherwise the errors of Load.
Result<std::vector<TensorEntry>> ReadTensors(
    const std::string& path, const std::vector<std::string>& names,
    const LoadOptions& options = {});

// Where each tensor and RNG record of a file would be placed.
struct Placement {
  std::string name;
  bool is_rng = false;
  std::string section;  // empty for RNG records
  Role role = Role::kHost;
  Device origin;
  Device target;
};

// Computes the placement a Load with `options` would use on a machine with
// `cuda_device_count` CUDA devices (-1: ask the options' runtime). Returns
// exactly the error the load would return instead.
Result<std::vector<Placement>> PlanLoad(const std::string& path,
                                        const LoadOptions& options = {},
                                        int cuda_device_count = -1);

}  // namespace rckpt

#endif  // RCKPT_IO_H_
