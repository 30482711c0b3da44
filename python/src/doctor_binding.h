// rckpt._core.doctor: RunDoctor (rckpt/doctor.h) as a dict, for
// rckpt.doctor(); device_pool_stats and release_device_pool: the process's
// runtime's pool (DeviceRuntime::PoolStats, ReleasePool).
#ifndef RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_
#define RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_

#include <nanobind/nanobind.h>

#include "rckpt/runtime.h"

namespace rckpt::python {

// DevicePoolStats as a dict of its fields.
nanobind::dict DevicePoolDict(const DevicePoolStats& pool);

void RegisterDoctor(nanobind::module_& m);

}  // namespace rckpt::python

#endif  // RCKPT_PYTHON_SRC_DOCTOR_BINDING_H_
