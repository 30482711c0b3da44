// rckpt._core.doctor: RunDoctor (rckpt/doctor.h) as a dict, for
// rckpt.doctor().
#ifndef RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_
#define RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_

#include <nanobind/nanobind.h>

namespace rckpt::python {

void RegisterDoctor(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_
