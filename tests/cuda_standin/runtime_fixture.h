// A test fixture holding rckpt's CUDA runtime over the stand-in driver,
// configured anew by each test, and checking at the end of each that the
// stand-in saw no misuse and the thread's context stack is as it found it.
#ifndef RCKPT_TESTS_CUDA_STANDIN_RUNTIME_FIXTURE_H_
#define RCKPT_TESTS_CUDA_STANDIN_RUNTIME_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "rckpt/runtime.h"
#include "test_runtime.h"

namespace rckpt {

class StandinRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override { Configure({}); }
  void TearDown() override {
    runtime_.reset();
    EXPECT_EQ(CudaStandinViolations(), "");
    EXPECT_EQ(CudaStandinContextDepth(), 0);
  }
  // Drops the runtime (the next Runtime() makes one) and configures the
  // stand-in's devices and faults.
  void Configure(RckptStandinConfig config) {
    runtime_.reset();
    ConfigureCudaStandin(config);
  }
  // rckpt's CUDA runtime over the stand-in, made at the first use (a failure
  // to make it fails the test, which goes on with an emulated runtime).
  DeviceRuntime& Runtime() {
    if (runtime_ != nullptr) return *runtime_;
    Result<std::unique_ptr<DeviceRuntime>> made =
        NewCudaRuntime({.driver_library = CudaStandinPath()});
    if (!made.ok()) ADD_FAILURE() << made.status().ToString();
    runtime_ = made.ok() ? std::move(*made) : NewEmulatedRuntime(0);
    return *runtime_;
  }

  std::unique_ptr<DeviceRuntime> runtime_;
};

}  // namespace rckpt

#endif  // RCKPT_TESTS_CUDA_STANDIN_RUNTIME_FIXTURE_H_
