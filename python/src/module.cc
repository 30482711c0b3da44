// rckpt._core: the bindings the rckpt Python package is written over. The
// Python layer (python/rckpt/) normalises arguments; everything about the
// format, placement and the engine happens in the C++ library, with the GIL
// released while files are read or written.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "async_module.h"
#include "call_args.h"
#include "doctor_binding.h"
#include "errors.h"
#include "folder_binding.h"
#include "format/collective_layout.h"
#include "from_checkpoint.h"
#include "inspect_binding.h"
#include "options_binding.h"
#include "other_formats.h"
#include "rckpt/convert.h"
#include "rckpt/human_bytes.h"
#include "rckpt/inspect.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "rng_layout_binding.h"
#include "s3_binding.h"
#include "storage_binding.h"
#include "to_checkpoint.h"
#include "torch_api.h"
#include "torch_device.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rckpt::python {
namespace {

void Save(const std::string& path, nb::handle state, nb::list rng, const SaveOptions& options,
          nb::dict metadata, nb::handle origin, nb::object progress, int emulate_devices,
          nb::handle fs) {
  std::vector<nb::object> keep_alive;
  Checkpoint ck = CheckpointToSave(state, rng, metadata, origin, &keep_alive);
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);

  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  Progress p(std::move(progress));
  SaveOptions o = SaveOptionsOf(options, runtime.get(), &p);
  // Reads each CUDA tensor after torch's work on its device, the
  // contiguous copies made above included.
  UseTorchForDevices(runtime.get(), &o);
  o.fs = files.get();
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::Save(path, ck, o);
  }
  p.RaiseIfPending();
  ThrowIfError(s);
}

// The sections of `ck`'s tree (the library kept only those the load chose):
// its top-level map, or a collective save's "common" map
// (format/collective_layout.h). With `file_tree`, the tree as the file has
// it, whole. Also the saved ranks' own trees and the saved world size of a
// collective save.
void AddState(Checkpoint& ck, bool file_tree, nb::dict tensors, nb::dict* out) {
  Value& tree = ck.Tree();
  const int64_t world_size = SavedWorldSize(ck.Metadata());
  const Value* sections = SectionsOfTree(ck.Metadata(), tree);
  if (world_size > 0 && sections != &tree) {
    (*out)["world_size"] = nb::int_(world_size);
    if (const Value* ranks = tree.Find(kRanksTreeKey)) {
      (*out)["rank_states"] = TreeToPython(*ranks, ck, tensors);
    }
  }
  (*out)["state"] = TreeToPython(file_tree || sections == nullptr ? tree : *sections, ck, tensors);
}

// A load of any format (LoadAny): a file of another format is imported into
// a private .rckpt first; "import" says what the import found.
nb::dict Load(const std::string& path, nb::handle map_location,
              std::optional<std::string> model_device, std::vector<std::string> sections,
              std::vector<std::string> skip_sections, bool verify, bool map_file, int threads,
              nb::object progress, int emulate_devices, bool file_tree, bool device_unshuffle,
              bool strict, nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  Progress p(std::move(progress));
  LoadOptions o = LoadOptionsOf(verify, threads, runtime.get(), &p);
  TorchDeviceAllocator torch_memory;
  UseTorchForDevices(runtime.get(), &torch_memory, &o);
  o.device_unshuffle = device_unshuffle;
  std::optional<nb::python_error> callback_error;
  SetPlacement(map_location, model_device, &o, &callback_error);
  o.sections = std::move(sections);
  o.skip_sections = std::move(skip_sections);
  o.map_file = map_file;
  o.fs = files.get();
  LoadStats stats;
  o.stats = &stats;
  ImportOptions import;
  import.strict = strict;
  ImportReport imported;
  std::optional<Result<Checkpoint>> loaded;
  {
    nb::gil_scoped_release release;
    loaded.emplace(LoadAny(path, o, import, &imported));
  }
  RaiseCallbackError(&callback_error);
  p.RaiseIfPending();
  Checkpoint ck = ValueOrThrow(std::move(*loaded));

  nb::dict out;
  TorchTensors t = TensorsToTorch(ck.tensors(), runtime, runtime != nullptr, &torch_memory);
  out["tensors"] = t.tensors;
  AddState(ck, file_tree, t.tensors, &out);
  out["placement"] = t.placement;
  out["origin"] = t.origin;
  out["rng"] = RngTuples(ck.rng());
  nb::dict sections_out, metadata;
  for (const SectionInfo& s : ck.sections()) sections_out[s.name.c_str()] = std::string(RoleName(s.role));
  for (const auto& [k, v] : ck.Metadata()) metadata[k.c_str()] = v;
  out["sections"] = sections_out;
  out["metadata"] = metadata;
  nb::dict st;
  st["bytes_read"] = stats.bytes_read;
  st["bytes_restored"] = stats.bytes_restored;
  st["seconds"] = stats.seconds;
  st["staging_high_water"] = stats.staging_high_water;
  st["staging_capacity"] = stats.staging_capacity;
  st["device_unshuffled_bytes"] = stats.device_unshuffled_bytes;
  st["host_unshuffled_bytes"] = stats.host_unshuffled_bytes;
  st["host_unshuffle_reason"] = stats.host_unshuffle_reason;
  st["device_pool"] = DevicePoolDict(stats.device_pool);
  out["stats"] = st;
  nb::dict import_report;
  import_report["format"] = imported.format;
  import_report["inert_classes"] = nb::cast(imported.inert_classes);
  import_report["warnings"] = nb::cast(imported.warnings);
  out["import"] = import_report;
  return out;
}

void LoadInto(const std::string& path, nb::list targets, std::vector<std::string> sections,
              bool strict, bool verify, int threads, nb::object progress, int emulate_devices,
              nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  std::vector<LoadTarget> ts;
  ts.reserve(targets.size());
  std::vector<nb::object> keep_alive;
  for (nb::handle item : targets) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    std::string name = nb::cast<std::string>(t[0]);
    if (!nb::cast<bool>(t[1].attr("is_contiguous")())) {
      throw StatusError(Status::InvalidArgument(
          "load_into target '" + name + "' is not contiguous; restore into a contiguous tensor"));
    }
    TensorView v = TorchTensorView(t[1], name, &keep_alive);
    if (!keep_alive.empty()) {
      // The view is of a copy (a conjugate or negative complex view):
      // restoring into it would leave the caller's tensor unchanged.
      throw StatusError(Status::InvalidArgument(
          "load_into target '" + name + "' is a conjugate or negative view; resolve it first"));
    }
    ts.push_back(LoadTarget{name, const_cast<void*>(v.data), v.dtype, v.shape, v.device});
  }
  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  Progress p(std::move(progress));
  LoadOptions o = LoadOptionsOf(verify, threads, runtime.get(), &p);
  // The copies wait for torch's pending work on the targets.
  UseTorchForDevices(runtime.get(), nullptr, &o);
  o.sections = std::move(sections);
  o.fs = files.get();
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::LoadInto(path, ts, o, strict);
  }
  p.RaiseIfPending();
  ThrowIfError(s);
}

// What a file holds, from its manifest alone (no tensor data is read): its
// tensors (name, section, torch dtype, shape, and the blocks of a sharded
// tensor), metadata and tree (each tensor reference as ref(name), RNG
// records as their generators' forms). What rckpt.dcp.Reader describes to
// DCP.
nb::dict Describe(const std::string& path, nb::handle ref) {
  InspectReport report;
  {
    nb::gil_scoped_release release;
    report = ValueOrThrow(InspectRckpt(path));
  }
  const TorchApi& api = Torch();
  nb::list tensors;
  nb::dict refs;
  for (const InspectTensor& t : report.tensors) {
    refs[nb::str(t.name.data(), t.name.size())] = ref(t.name);
    nb::dict d;
    d["name"] = t.name;
    d["section"] = t.section;
    const size_t k = static_cast<size_t>(t.dtype);
    d["dtype"] = k < api.torch_dtype.size() ? api.torch_dtype[k] : nb::none();
    d["dtype_name"] = std::string(DTypeName(t.dtype));
    d["shape"] = nb::cast(t.shape);
    nb::list blocks;
    for (const InspectShard& s : t.shards) {
      blocks.append(nb::make_tuple(nb::cast(s.offsets), nb::cast(s.sizes)));
    }
    d["blocks"] = blocks;
    tensors.append(d);
  }
  nb::dict metadata;
  for (const auto& [k, v] : report.metadata) metadata[nb::str(k.data(), k.size())] = v;
  const Checkpoint no_rng;
  nb::dict out;
  out["tensors"] = tensors;
  out["metadata"] = metadata;
  out["tree"] = TreeToPython(report.tree, no_rng, refs);
  return out;
}

int CudaDeviceCount(int emulate_devices) {
  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  return ValueOrThrow(runtime ? runtime->DeviceCount() : DefaultRuntime().DeviceCount());
}

}  // namespace
}  // namespace rckpt::python

NB_MODULE(_core, m) {
  using namespace rckpt::python;
  RegisterErrorTranslator();
  RegisterOptions(m);
  m.def("save", &Save, "path"_a, "state"_a, "rng"_a, "options"_a, "metadata"_a,
        "origin"_a.none(), "progress"_a.none(), "emulate_devices"_a, "fs"_a.none() = nb::none());
  m.def("load", &Load, "path"_a, "map_location"_a.none(), "model_device"_a.none(),
        "sections"_a, "skip_sections"_a, "verify"_a, "map_file"_a, "threads"_a,
        "progress"_a.none(), "emulate_devices"_a, "file_tree"_a, "device_unshuffle"_a = true,
        "strict"_a = false, "fs"_a.none() = nb::none());
  m.def("load_into", &LoadInto, "path"_a, "targets"_a, "sections"_a, "strict"_a, "verify"_a,
        "threads"_a, "progress"_a.none(), "emulate_devices"_a, "fs"_a.none() = nb::none());
  m.def("cuda_device_count", &CudaDeviceCount, "emulate_devices"_a);
  RegisterOtherFormats(m);
  m.def("describe", &Describe, "path"_a, "ref"_a);
  // Looks torch up once, at `import rckpt`, while one thread runs.
  m.def("init_torch", [] { Torch(); });
  m.def("human_bytes", &rckpt::HumanBytes, "n"_a);
  m.def("python_rng_bytes", &PythonRngBytes, "state"_a);
  m.def("python_rng_tuple", [](nb::bytes b) {
    return PythonRngTuple({reinterpret_cast<const std::byte*>(b.c_str()), b.size()});
  }, "data"_a);
  m.def("validate_rng", [](const std::string& kind_name, nb::bytes b) {
    ThrowIfError(rckpt::ValidateRngState(
        RngKindOf(kind_name), {reinterpret_cast<const std::byte*>(b.c_str()), b.size()}));
  }, "kind"_a, "data"_a);
  RegisterAsync(m);
  RegisterDoctor(m);
  RegisterRngLayouts(m);
  RegisterStorage(m);
  RegisterFolder(m);
  RegisterS3(m);
  RegisterInspect(m);
  m.attr("version") = RCKPT_VERSION_STRING;
}
