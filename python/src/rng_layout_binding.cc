#include "rng_layout_binding.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include "core/rng_layout.h"
#include "errors.h"

namespace rckpt::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

const char* TypeName(NumpyFieldType t) {
  switch (t) {
    case NumpyFieldType::kU32: return "u32";
    case NumpyFieldType::kU64: return "u64";
    case NumpyFieldType::kU128: return "u128";
    case NumpyFieldType::kF64: return "f64";
  }
  return "?";
}

nb::list NumpyLayouts() {
  nb::list out;
  for (const NumpyRngLayout& l : NumpyRngLayouts()) {
    nb::list fields;
    for (const NumpyRngField& f : l.fields) {
      fields.append(nb::make_tuple(nb::str(f.path.data(), f.path.size()), TypeName(f.type),
                                   f.count, f.offset, f.max));
    }
    out.append(nb::make_tuple(l.tag, nb::str(l.bit_generator.data(), l.bit_generator.size()),
                              l.legacy, l.bytes, fields));
  }
  return out;
}

}  // namespace

void RegisterRngLayouts(nb::module_& m) {
  m.def("numpy_rng_layouts", &NumpyLayouts);
  m.def("validate_numpy_rng", [](nb::bytes b) {
    ThrowIfError(ValidateNumpyRng({reinterpret_cast<const std::byte*>(b.c_str()), b.size()}));
  }, "data"_a);
}

}  // namespace rckpt::python
