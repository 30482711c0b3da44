#include "options_binding.h"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "engine/save_options.h"
#include "errors.h"
#include "rckpt/options.h"

namespace rckpt::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A Python int into an integer field; one the field cannot hold is refused
// naming the value given (the library's validation then checks the range).
template <typename T>
T Held(const nb::int_& value, const char* name) {
  T v{};
  if (!nb::try_cast(value, v)) {
    throw StatusError(Status::InvalidArgument(std::string("SaveOptions.") + name + " is " +
                                              nb::cast<std::string>(nb::str(value)) +
                                              ": out of range"));
  }
  return v;
}

}  // namespace

void RegisterOptions(nb::module_& m) {
  nb::class_<SaveOptions>(m, "SaveOptions")
      .def(nb::init<>())
      .def_prop_rw(
          "codec", [](const SaveOptions& o) { return std::string(CodecName(o.codec)); },
          [](SaveOptions& o, const std::string& name) { o.codec = ValueOrThrow(ParseCodec(name)); })
      .def_prop_rw(
          "level", [](const SaveOptions& o) { return o.level; },
          [](SaveOptions& o, nb::int_ v) { o.level = Held<int>(v, "level"); })
      .def_prop_rw(
          "chunk_bytes", [](const SaveOptions& o) { return o.chunk_bytes; },
          [](SaveOptions& o, nb::int_ v) {
            o.chunk_bytes = Held<uint64_t>(v, "chunk_bytes");
          })
      .def_prop_rw(
          "shuffle", [](const SaveOptions& o) { return std::string(ShuffleName(o.shuffle)); },
          [](SaveOptions& o, const std::string& name) {
            o.shuffle = ValueOrThrow(ParseShuffle(name));
          })
      .def_prop_rw(
          "threads", [](const SaveOptions& o) { return o.threads; },
          [](SaveOptions& o, nb::int_ v) { o.threads = Held<int>(v, "threads"); })
      .def_rw("replace", &SaveOptions::replace)
      .def("check", [](const SaveOptions& o) { ThrowIfError(ValidateSaveOptions(o)); });
}

}  // namespace rckpt::python
