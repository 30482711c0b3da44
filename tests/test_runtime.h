// The device runtime the engine's tests run through.
//
// By default, the emulated runtime. A test binary started with
// --cuda-standin (ctest: the same cases again, named standin.*, label
// cuda_standin) gets rckpt's real CUDA runtime instead, loading the stand-in
// driver (tests/cuda_standin/), so the adapter's code runs every device
// path without a GPU; the testing hooks of EmulatedRuntime are answered by
// the stand-in, and after every test the stand-in's violations, the calling
// thread's context stack and anything left live fail the test binary.
#ifndef RCKPT_TESTS_TEST_RUNTIME_H_
#define RCKPT_TESTS_TEST_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "cuda_standin/standin_control.h"
#include "runtime/emulated_runtime.h"

namespace rckpt {

// True in a binary started with --cuda-standin.
bool UsingCudaStandin();
void SetUsingCudaStandin(bool on);
// True in a binary started with --require-gpu: a GPU test that would skip
// fails instead (the GPU proof).
bool RequireGpu();
void SetRequireGpu(bool on);

// Skips a test without a GPU, or fails it under --require-gpu (the GPU
// proof, where a skip would hide a device that does not work).
#define RCKPT_SKIP_WITHOUT_GPU(reason)                         \
  do {                                                         \
    if (::rckpt::RequireGpu()) FAIL() << "no GPU: " << reason; \
    GTEST_SKIP() << reason;                                    \
  } while (0)

// The emulated runtime of `options`, or the CUDA runtime over the stand-in
// configured alike (devices, memory, the n-th copy failing, no device
// un-shuffle: the kernel image does not load).
std::unique_ptr<EmulatedRuntime> NewTestRuntime(const EmulatedRuntimeOptions& options);
std::unique_ptr<EmulatedRuntime> NewTestRuntime(int device_count);

// The stand-in driver library (tests/cuda_standin), for --cuda-driver.
std::string CudaStandinPath();

// For tests that run the CLI, the demo or the MPI driver as children: in
// --cuda-standin mode, every "--emulate-devices N" becomes "--cuda-driver
// <stand-in>", and this process's environment gives the children's stand-in
// N devices (RCKPT_STANDIN_DEVICES; RCKPT_TEST_CUDA_DRIVER for the MPI
// driver); otherwise the arguments are returned unchanged.
std::vector<std::string> StandinArgs(std::vector<std::string> args);
std::string StandinCommand(const std::string& command);
// In --cuda-standin mode, points this process's children that take no flags
// (the MPI driver) at the stand-in with `devices` devices.
void StandinEnvironment(int devices);

// The stand-in's controls (cuda_standin/standin_control.h), for tests of
// the CUDA runtime itself. REQUIRES: rckpt built with its CUDA runtime.
void ConfigureCudaStandin(const RckptStandinConfig& config);
RckptStandinStats CudaStandinStats();
std::string CudaStandinViolations();  // one per line; "" when none
int CudaStandinContextDepth();        // of the calling thread
int CudaStandinCurrentDevice();       // of the calling thread; -1: none
void SetCudaStandinCurrentDevice(int device);
int CudaStandinDeviceOf(const void* p);  // the device whose memory holds p; -1: none
// As cudaDeviceReset of `device` (rckpt_standin_reset_device).
void ResetCudaStandinDevice(int device);
// Holds `stream` of `device` busy until the returned gate is released, as a
// long kernel would (rckpt_standin_hold_stream).
void* HoldCudaStandinStream(void* stream, int device);
void ReleaseCudaStandinStream(void* gate);
// Holds every stream of `device`, the default one and those made later,
// until ReleaseCudaStandinStream(gate) (rckpt_standin_hold_device).
void* HoldCudaStandinDevice(int device);
// From now on no event can be recorded and no stream synchronised, the
// latter failing with `error` (rckpt_standin_fail_waits).
void FailCudaStandinWaits(int error);
// Ends the injected event and stream synchronisation faults
// (rckpt_standin_lift_faults).
void LiftCudaStandinFaults();

// After a test in --cuda-standin mode: what the stand-in saw go wrong (its
// violations, a context left current on this thread, objects left live
// when no test runtime is); "" when nothing did.
std::string CudaStandinProblems();

}  // namespace rckpt

#endif  // RCKPT_TESTS_TEST_RUNTIME_H_
