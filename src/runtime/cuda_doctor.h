// The CUDA half of RunDoctor (rckpt/doctor.h): the driver and its devices.
// Defined in cuda/examine_cuda.cc when rckpt is built with its CUDA runtime, and
// as "not built" otherwise (runtime_select.cc).
#ifndef RCKPT_SRC_RUNTIME_CUDA_DOCTOR_H_
#define RCKPT_SRC_RUNTIME_CUDA_DOCTOR_H_

#include "rckpt/doctor.h"

namespace rckpt {

// Fills the report's driver, device, problem and pinned-probe fields,
// examining the devices `doctor` asks for.
void ExamineCuda(const CudaRuntimeOptions& options, const DoctorOptions& doctor,
                 DoctorReport* report);

}  // namespace rckpt

#endif  // RCKPT_SRC_RUNTIME_CUDA_DOCTOR_H_
