#include "call_args.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>

#include "errors.h"
#include "to_checkpoint.h"
#include "torch_api.h"
#include "torch_device.h"

namespace rckpt::python {

ProgressCallback Progress::Callback() {
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

void Progress::RaiseIfPending() {
  if (error_) {
    nb::python_error e = std::move(*error_);
    error_.reset();
    throw e;
  }
}

std::shared_ptr<DeviceRuntime> RuntimeFor(int emulate_devices) {
  if (emulate_devices < 0) {
    throw StatusError(Status::InvalidArgument("emulate_devices must be >= 0, got " +
                                              std::to_string(emulate_devices)));
  }
  if (emulate_devices == 0) return nullptr;
  return std::shared_ptr<DeviceRuntime>(NewEmulatedRuntime(emulate_devices));
}

SaveOptions SaveOptionsOf(const SaveOptions& options, DeviceRuntime* runtime, Progress* progress) {
  SaveOptions o = options;
  o.runtime = runtime;
  o.progress = progress->Callback();
  return o;
}

LoadOptions LoadOptionsOf(bool verify, int threads, DeviceRuntime* runtime, Progress* progress) {
  LoadOptions o;
  o.verify_checksums = verify;
  o.threads = threads;
  o.runtime = runtime;
  o.progress = progress->Callback();
  return o;
}

void UseTorchForDevices(DeviceRuntime* runtime, TorchDeviceAllocator* alloc, LoadOptions* o) {
  if (runtime != nullptr) return;
  o->caller_stream = TorchCallerStream();
  o->device_allocator = alloc;
  o->auto_device = TorchAutoDevice(&DefaultRuntime());
}

void UseTorchForDevices(DeviceRuntime* runtime, SaveOptions* o) {
  if (runtime != nullptr) return;
  o->caller_stream = TorchCallerStream();
}

RngKind RngKindOf(const std::string& name) {
  RngKind kind;
  if (!ParseRngKind(name, &kind)) {
    throw StatusError(Status::InvalidArgument("unknown RNG kind '" + name + "'"));
  }
  return kind;
}

void AddMetadata(nb::dict metadata, Checkpoint* ck) {
  for (auto [k, v] : metadata) ck->Metadata()[nb::cast<std::string>(k)] = nb::cast<std::string>(v);
}

void AddRngRecords(nb::handle records, Checkpoint* ck) {
  for (nb::handle r : records) {
    nb::tuple t = nb::cast<nb::tuple>(r);
    const RngKind kind = RngKindOf(nb::cast<std::string>(t[1]));
    Device dev = ValueOrThrow(ParseRecordedDevice(nb::cast<std::string>(t[2])));
    nb::bytes b = nb::cast<nb::bytes>(t[3]);
    ThrowIfError(ck->AddRng(nb::cast<std::string>(t[0]), kind,
                            {reinterpret_cast<const std::byte*>(b.c_str()), b.size()}, dev));
  }
}

Checkpoint CheckpointToSave(nb::handle state, nb::handle rng, nb::dict metadata,
                            nb::handle origin, std::vector<nb::object>* keep_alive,
                            std::vector<nb::object>* cuda_tensors) {
  Checkpoint ck;
  BuildCheckpoint(state, origin, &ck, keep_alive, nullptr, cuda_tensors);
  AddRngRecords(rng, &ck);
  AddMetadata(metadata, &ck);
  return ck;
}

nb::list RngTuples(const std::vector<RngRecord>& records) {
  nb::list out;
  for (const RngRecord& r : records) {
    out.append(nb::make_tuple(r.name, std::string(RngKindName(r.kind)), r.origin.ToString(),
                              nb::bytes(r.bytes.data(), r.bytes.size())));
  }
  return out;
}

void SetPlacement(nb::handle map_location, std::optional<std::string> model_device, LoadOptions* o,
                  std::optional<nb::python_error>* callback_error) {
  if (model_device) {
    Result<DeviceSpec> parsed = DeviceSpec::Parse(*model_device);
    if (!parsed.ok()) {
      throw StatusError(Status::InvalidArgument("model_device: " + parsed.status().message()));
    }
    o->model_device = *parsed;
  }
  if (map_location.is_none()) return;
  if (PyUnicode_Check(map_location.ptr())) {
    o->map_location = ValueOrThrow(MapLocation::Parse(nb::cast<std::string>(map_location)));
  } else if (PyDict_Check(map_location.ptr())) {
    // {"cuda:1": "cuda:0"} is the tag map "cuda:1=cuda:0", one grammar.
    std::string spec;
    for (auto [k, v] : nb::borrow<nb::dict>(map_location)) {
      if (!spec.empty()) spec += ',';  // appended: GCC 12's -O3 -Wrestrict on "," + a temporary
      spec.append(nb::cast<std::string>(k)).append("=").append(nb::cast<std::string>(v));
    }
    o->map_location = spec.empty() ? MapLocation::Map({}) : ValueOrThrow(MapLocation::Parse(spec));
  } else {
    nb::object fn = nb::borrow(map_location);
    o->map_location =
        MapLocation::Fn([fn, callback_error](const TensorInfo& info) -> std::optional<Device> {
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

void RaiseCallbackError(std::optional<nb::python_error>* callback_error) {
  if (*callback_error) {
    nb::python_error e = std::move(**callback_error);
    callback_error->reset();
    throw e;
  }
}

}  // namespace rckpt::python
