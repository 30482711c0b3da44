// rckpt._core's view of the RNG byte layouts (core/rng_layout.h) that
// Python code packs itself: NumPy's, for rckpt.rng.
#ifndef RCKPT_PYTHON_SRC_RNG_LAYOUT_BINDING_H_
#define RCKPT_PYTHON_SRC_RNG_LAYOUT_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

// numpy_rng_layouts() -> [(tag, bit_generator, legacy, bytes,
//   [(path, "u32" | "u64" | "u128" | "f64", count, offset, max), ...]), ...]
// validate_numpy_rng(data): CorruptionError naming the field, as a load of
//   an imported record would.
void RegisterRngLayouts(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_RNG_LAYOUT_BINDING_H_
