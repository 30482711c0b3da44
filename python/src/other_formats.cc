#include "other_formats.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <vector>

#include "call_args.h"
#include "errors.h"
#include "rckpt/convert.h"
#include "s3_binding.h"

namespace rckpt::python {
namespace {

nb::list StringList(const std::vector<std::string>& items) {
  nb::list out;
  for (const std::string& s : items) out.append(nb::str(s.data(), s.size()));
  return out;
}

// An optional format name ("" for none), parsed by the library's table.
CheckpointFormat FormatNamed(const std::string& name) {
  if (name.empty()) return CheckpointFormat::kUnknown;
  return ValueOrThrow(ParseCheckpointFormat(name));
}

nb::dict Convert(const std::string& src, const std::string& dst, const std::string& from_format,
                 const std::string& to_format, bool strict, std::vector<std::string> rng_keys,
                 std::map<std::string, std::string> sections, bool drop_objects,
                 const SaveOptions& save, const std::string& set_device, nb::object progress,
                 nb::handle fs) {
  std::shared_ptr<FileSystem> files = FileSystemOf(fs);
  ConvertOptions o;
  o.from = FormatNamed(from_format);
  o.to = FormatNamed(to_format);
  o.import.strict = strict;
  o.import.rng_keys = std::move(rng_keys);
  o.import.section_overrides = std::move(sections);
  o.exporter.drop_objects = drop_objects;
  o.save = save;
  if (!set_device.empty()) {
    o.set_device = ValueOrThrow(MapLocation::Parse(set_device, "set_device"));
  }
  o.fs = files.get();
  Progress p(std::move(progress));
  o.save.progress = p.Callback();

  ConvertReport report;
  Status s;
  {
    nb::gil_scoped_release release;
    s = rckpt::Convert(src, dst, o, &report);
  }
  p.RaiseIfPending();
  ThrowIfError(s);

  nb::dict r;
  r["format"] = report.read.format;
  r["tensors"] = report.tensors;
  r["rng_records"] = report.rng_records;
  r["bytes"] = report.tensor_bytes;
  r["seconds"] = report.seconds;
  r["summary"] = report.summary;
  r["inert_classes"] = StringList(report.read.inert_classes);
  r["warnings"] = StringList(report.read.warnings);
  r["not_kept"] = StringList(report.written.not_kept);
  r["notes"] = StringList(report.written.notes);
  return r;
}

}  // namespace

void RegisterOtherFormats(nb::module_& m) {
  using namespace nb::literals;
  m.def("convert", &Convert, "src"_a, "dst"_a, "from_format"_a, "to_format"_a, "strict"_a,
        "rng_keys"_a, "sections"_a, "drop_objects"_a, "save"_a, "set_device"_a,
        "progress"_a.none(), "fs"_a.none() = nb::none());
}

}  // namespace rckpt::python
