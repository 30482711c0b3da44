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

#include "errors.h"
#include "from_checkpoint.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "to_checkpoint.h"
#include "torch_api.h"
#include "rckpt/human_bytes.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rckpt::python {
namespace {

// Bridges the engine's progress callback (called on the calling thread while
// the GIL is released) to Python: Ctrl-C, an exception in the user's
// callback, or the callback returning False cancel the operation; the
// Python exception is raised once the engine has cleaned up.
class Progress {
 public:
  explicit Progress(nb::object callback) : callback_(std::move(callback)) {}

  ProgressCallback Callback() {
    return [this](uint64_t done, uint64_t total) {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        error_.emplace();
        return false;
      }
      if (callback_.is_none()) return true;
      try {
        nb::object r = callback_(done, total);
        return !(r.is(Py_False));
      } catch (nb::python_error& e) {
        error_.emplace(std::move(e));
        return false;
      }
    };
  }

  // With the GIL held: raises the pending Python exception, if any.
  void RaiseIfPending() {
    if (error_) {
      nb::python_error e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

 private:
  nb::object callback_;
  std::optional<nb::python_error> error_;
};

// The runtime of one call: N emulated devices, or the default one.
std::shared_ptr<DeviceRuntime> RuntimeFor(int emulate_devices) {
  if (emulate_devices < 0) {
    throw StatusError(Status::InvalidArgument("emulate_devices must be >= 0, got " +
                                              std::to_string(emulate_devices)));
  }
  if (emulate_devices == 0) return nullptr;
  return std::shared_ptr<DeviceRuntime>(NewEmulatedRuntime(emulate_devices));
}

Codec ParseCodec(const std::string& name) {
  if (name == "none") return Codec::kNone;
  if (name == "zstd") return Codec::kZstd;
  throw StatusError(Status::InvalidArgument("codec must be 'none' or 'zstd', got '" + name + "'"));
}

void Save(const std::string& path, nb::handle state, nb::list rng, const std::string& codec,
          int level, uint64_t chunk_bytes, int threads, nb::dict metadata, nb::handle origin,
          nb::object progress, int emulate_devices) {
  Checkpoint ck;
  std::vector<nb::object> keep_alive;
  BuildCheckpoint(state, origin, &ck, &keep_alive);
  for (nb::handle r : rng) {
    nb::tuple t = nb::cast<nb::tuple>(r);
    RngKind kind;
    std::string kind_name = nb::cast<std::string>(t[1]);
    if (!ParseRngKind(kind_name, &kind)) {
      throw StatusError(Status::InvalidArgument("unknown RNG kind '" + kind_name + "'"));
    }
    Device dev = ValueOrThrow(ParseDevice(nb::cast<std::string>(t[2])));
    nb::bytes b = nb::cast<nb::bytes>(t[3]);
    ThrowIfError(ck.AddRng(nb::cast<std::string>(t[0]), kind,
                           {reinterpret_cast<const std::byte*>(b.c_str()), b.size()}, dev));
  }
  for (auto [k, v] : metadata) ck.Metadata()[nb::cast<std::string>(k)] = nb::cast<std::string>(v);

  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  Progress p(std::move(progress));
  SaveOptions o;
  o.codec = ParseCodec(codec);
  o.level = level;
  o.chunk_bytes = chunk_bytes;
  o.threads = threads;
  o.runtime = runtime.get();
  o.progress = p.Callback();
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::Save(path, ck, o);
  }
  p.RaiseIfPending();
  ThrowIfError(s);
}

// Fills the placement options from the Python arguments (already normalised
// to strings, dicts and callables by the Python layer).
void SetPlacement(nb::handle map_location, std::optional<std::string> model_device,
                  LoadOptions* o, std::optional<nb::python_error>* callback_error) {
  if (model_device) o->model_device = ValueOrThrow(DeviceSpec::Parse(*model_device));
  if (map_location.is_none()) return;
  if (PyUnicode_Check(map_location.ptr())) {
    o->map_location = ValueOrThrow(MapLocation::Parse(nb::cast<std::string>(map_location)));
  } else if (PyDict_Check(map_location.ptr())) {
    std::map<Device, Device> tags;
    for (auto [k, v] : nb::borrow<nb::dict>(map_location)) {
      tags[ValueOrThrow(ParseDevice(nb::cast<std::string>(k)))] =
          ValueOrThrow(ParseDevice(nb::cast<std::string>(v)));
    }
    o->map_location = MapLocation::Map(std::move(tags));
  } else {
    nb::object fn = nb::borrow(map_location);
    o->map_location = MapLocation::Fn([fn, callback_error](const TensorInfo& info)
                                          -> std::optional<Device> {
      nb::gil_scoped_acquire gil;
      if (*callback_error) return std::nullopt;
      try {
        nb::dict d;
        d["name"] = info.name;
        d["section"] = info.section;
        d["role"] = std::string(RoleName(info.role));
        d["dtype"] = std::string(DTypeName(info.dtype));
        d["shape"] = nb::tuple(nb::cast(info.shape));
        d["origin"] = info.origin.ToString();
        nb::object r = fn(d);
        if (r.is_none()) return std::nullopt;
        Result<Device> dev = ParseDevice(Str(r));
        if (!dev.ok()) {
          throw nb::value_error(("map_location returned " + nb::cast<std::string>(nb::repr(r)) +
                                 " for '" + info.name + "': " + dev.status().message())
                                    .c_str());
        }
        return *dev;
      } catch (nb::python_error& e) {
        callback_error->emplace(std::move(e));
      } catch (const nb::builtin_exception& e) {
        PyErr_SetString(PyExc_ValueError, e.what());
        callback_error->emplace();
      }
      return std::nullopt;
    });
  }
}

nb::dict Load(const std::string& path, nb::handle map_location,
              std::optional<std::string> model_device, std::vector<std::string> sections,
              std::vector<std::string> skip_sections, bool verify, bool map_file, int threads,
              nb::object progress, int emulate_devices) {
  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  std::optional<nb::python_error> callback_error;
  LoadOptions o;
  SetPlacement(map_location, model_device, &o, &callback_error);
  o.sections = std::move(sections);
  o.skip_sections = std::move(skip_sections);
  o.verify_checksums = verify;
  o.map_file = map_file;
  o.threads = threads;
  o.runtime = runtime.get();
  LoadStats stats;
  o.stats = &stats;
  Progress p(std::move(progress));
  o.progress = p.Callback();
  std::optional<Result<Checkpoint>> loaded;
  {
    nb::gil_scoped_release release;
    loaded.emplace(rckpt::Load(path, o));
  }
  if (callback_error) {
    nb::python_error e = std::move(*callback_error);
    throw e;
  }
  p.RaiseIfPending();
  Checkpoint ck = ValueOrThrow(std::move(*loaded));

  nb::dict out;
  TorchTensors t = TensorsToTorch(ck, runtime, runtime != nullptr);
  out["tensors"] = t.tensors;
  out["state"] = TreeToPython(ck, t.tensors);
  out["placement"] = t.placement;
  out["origin"] = t.origin;
  nb::list rng;
  for (const RngRecord& r : ck.rng()) {
    rng.append(nb::make_tuple(r.name, std::string(RngKindName(r.kind)), r.origin.ToString(),
                              nb::bytes(r.bytes.data(), r.bytes.size())));
  }
  out["rng"] = rng;
  nb::dict sections_out, metadata;
  for (const SectionInfo& s : ck.sections()) sections_out[s.name.c_str()] = std::string(RoleName(s.role));
  for (const auto& [k, v] : ck.Metadata()) metadata[k.c_str()] = v;
  out["sections"] = sections_out;
  out["metadata"] = metadata;
  nb::dict st;
  st["bytes_read"] = stats.bytes_read;
  st["bytes_restored"] = stats.bytes_restored;
  st["seconds"] = stats.seconds;
  out["stats"] = st;
  return out;
}

void LoadInto(const std::string& path, nb::list targets, std::vector<std::string> sections,
              bool strict, bool verify, int threads, nb::object progress, int emulate_devices) {
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
  LoadOptions o;
  o.sections = std::move(sections);
  o.verify_checksums = verify;
  o.threads = threads;
  o.runtime = runtime.get();
  Progress p(std::move(progress));
  o.progress = p.Callback();
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::LoadInto(path, ts, o, strict);
  }
  p.RaiseIfPending();
  ThrowIfError(s);
}

int CudaDeviceCount(int emulate_devices) {
  std::shared_ptr<DeviceRuntime> runtime = RuntimeFor(emulate_devices);
  return runtime ? runtime->DeviceCount() : DefaultRuntime().DeviceCount();
}

}  // namespace
}  // namespace rckpt::python

NB_MODULE(_core, m) {
  using namespace rckpt::python;
  RegisterErrorTranslator();
  m.def("save", &Save, "path"_a, "state"_a, "rng"_a, "codec"_a, "level"_a, "chunk_bytes"_a,
        "threads"_a, "metadata"_a, "origin"_a.none(), "progress"_a.none(),
        "emulate_devices"_a);
  m.def("load", &Load, "path"_a, "map_location"_a.none(), "model_device"_a.none(),
        "sections"_a, "skip_sections"_a, "verify"_a, "map_file"_a, "threads"_a,
        "progress"_a.none(), "emulate_devices"_a);
  m.def("load_into", &LoadInto, "path"_a, "targets"_a, "sections"_a, "strict"_a, "verify"_a,
        "threads"_a, "progress"_a.none(), "emulate_devices"_a);
  m.def("cuda_device_count", &CudaDeviceCount, "emulate_devices"_a);
  // Looks torch up once, at `import rckpt`, while one thread runs.
  m.def("init_torch", [] { Torch(); });
  m.def("human_bytes", &rckpt::HumanBytes, "n"_a);
  m.def("python_rng_bytes", &PythonRngBytes, "state"_a);
  m.def("python_rng_tuple", [](nb::bytes b) {
    return PythonRngTuple({reinterpret_cast<const std::byte*>(b.c_str()), b.size()});
  }, "data"_a);
  m.def("validate_rng", [](const std::string& kind_name, nb::bytes b) {
    rckpt::RngKind kind;
    if (!rckpt::ParseRngKind(kind_name, &kind)) {
      throw StatusError(rckpt::Status::InvalidArgument("unknown RNG kind '" + kind_name + "'"));
    }
    ThrowIfError(rckpt::ValidateRngState(
        kind, {reinterpret_cast<const std::byte*>(b.c_str()), b.size()}));
  }, "kind"_a, "data"_a);
  m.attr("version") = RCKPT_VERSION_STRING;
}
