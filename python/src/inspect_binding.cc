#include "inspect_binding.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "call_args.h"
#include "errors.h"
#include "from_checkpoint.h"
#include "rckpt/convert.h"
#include "rckpt/inspect.h"
#include "s3_binding.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rckpt::python {
namespace {

// What `rckpt inspect` reports: an .rckpt's manifest, or another format as
// the checkpoint a conversion would produce (stored sizes equal raw sizes).
Result<InspectReport> InspectAny(const std::string& path, FileSystem* files) {
  RCKPT_ASSIGN_OR_RETURN(CheckpointFormat format, DetectFormat(path, files));
  if (format == CheckpointFormat::kRckpt ||
      format == CheckpointFormat::kUnknown) {
    return InspectRckpt(path, files);
  }
  ImportOptions options;
  options.fs = files;
  ImportReport imported;
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck,
                         ReadAnyCheckpoint(path, options, &imported));
  InspectReport report =
      InspectCheckpoint(ck, path, std::string(CheckpointFormatName(format)));
  report.warnings = imported.warnings;
  for (const std::string& c : imported.inert_classes) {
    report.warnings.push_back("inert object (kept as data, never executed): " +
                              c);
  }
  return report;
}

nb::list Ints(const Shape& shape) {
  nb::list out;
  for (int64_t d : shape) out.append(d);
  return out;
}

// The keys of `rckpt inspect --json` (docs/CLI.md); the tree as Python
// values, each tensor reference as that tensor's entry of "tensors".
nb::dict Inspect(const std::string& path, nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  std::optional<Result<InspectReport>> got;
  {
    nb::gil_scoped_release release;
    got.emplace(InspectAny(path, files.get()));
  }
  const InspectReport r = ValueOrThrow(std::move(*got));
  nb::dict out;
  out["path"] = r.path;
  out["format"] = r.format;
  out["format_version"] = r.format_version;
  out["writer"] = r.writer;
  out["created_unix_ms"] = r.created_unix_ms;
  out["file_size"] = r.file_size;
  nb::dict metadata;
  for (const auto& [k, v] : r.metadata)
    metadata[nb::str(k.data(), k.size())] = v;
  out["metadata"] = metadata;
  nb::list sections;
  for (const SectionInfo& s : r.sections) {
    nb::dict d;
    d["name"] = s.name;
    d["role"] = std::string(RoleName(s.role));
    sections.append(d);
  }
  out["sections"] = sections;
  nb::list tensors;
  nb::dict by_name;
  for (const InspectTensor& t : r.tensors) {
    nb::dict d;
    d["name"] = t.name;
    d["section"] = t.section;
    d["role"] = std::string(RoleName(t.role));
    d["dtype"] = std::string(DTypeName(t.dtype));
    d["shape"] = Ints(t.shape);
    d["device"] = t.origin.ToString();
    d["nbytes"] = t.nbytes;
    d["stored_nbytes"] = t.stored_nbytes;
    d["codec"] = t.codec;
    d["chunks"] = t.chunks;
    nb::list shards;
    for (const InspectShard& s : t.shards) {
      nb::dict sd;
      sd["rank"] = s.rank;
      sd["device"] = s.device.ToString();
      sd["offsets"] = Ints(s.offsets);
      sd["sizes"] = Ints(s.sizes);
      sd["nbytes"] = s.nbytes;
      sd["stored_nbytes"] = s.stored_nbytes;
      sd["chunks"] = s.chunks;
      shards.append(sd);
    }
    d["shards"] = shards;
    tensors.append(d);
    by_name[nb::str(t.name.data(), t.name.size())] = d;
  }
  out["tensors"] = tensors;
  nb::list rng;
  for (const InspectRng& g : r.rng) {
    nb::dict d;
    d["name"] = g.name;
    d["kind"] = std::string(RngKindName(g.kind));
    d["device"] = g.device.ToString();
    d["nbytes"] = g.nbytes;
    rng.append(d);
  }
  out["rng"] = rng;
  out["warnings"] = nb::cast(r.warnings);
  const Checkpoint no_rng;
  out["tree"] = TreeToPython(r.tree, no_rng, by_name);
  return out;
}

// `rckpt verify`: every checksum. A file of another format is refused
// saying what it is, as the CLI does.
nb::dict Verify(const std::string& path, nb::object progress, nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  Progress p(std::move(progress));
  VerifyReport report;
  Status s;
  double seconds = 0;
  {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    s = VerifyRckpt(path, &report, p.Callback(), files.get());
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s.code() == StatusCode::kCorruption ||
        s.code() == StatusCode::kInvalidArgument) {
      Result<CheckpointFormat> format = DetectFormat(path, files.get());
      if (format.ok() && *format != CheckpointFormat::kRckpt &&
          *format != CheckpointFormat::kUnknown) {
        s = Status::Unsupported(
            "'" + path + "' is a " +
            std::string(CheckpointFormatName(*format)) +
            " checkpoint, not an .rckpt file: rckpt.verify checks .rckpt "
            "files only; rckpt.load reads it as it is, rckpt.inspect shows "
            "what it holds and rckpt.convert writes an .rckpt of it");
      }
    }
  }
  p.RaiseIfPending();
  ThrowIfError(s);
  nb::dict out;
  out["tensors"] = report.tensors;
  out["chunks"] = report.chunks;
  out["stored_bytes"] = report.stored_bytes;
  out["raw_bytes"] = report.raw_bytes;
  out["rng_records"] = report.rng_records;
  out["seconds"] = seconds;
  return out;
}

}  // namespace

void RegisterInspect(nb::module_& m) {
  m.def("inspect", &Inspect, "path"_a, "fs"_a.none() = nb::none());
  m.def("verify", &Verify, "path"_a, "progress"_a.none(),
        "fs"_a.none() = nb::none());
}

}  // namespace rckpt::python
