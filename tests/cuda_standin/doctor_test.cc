// RunDoctor (rckpt/doctor.h) over the stand-in driver: what it lists, what
// it counts as a problem, and what it only notes.
#include "rckpt/doctor.h"

#include <regex>

#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

class DoctorTest : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(CudaStandinViolations(), "");
    const RckptStandinStats s = CudaStandinStats();
    EXPECT_EQ(s.live_pinned + s.live_streams + s.live_events + s.retained_contexts +
                  s.live_modules,
              0)
        << "the doctor leaves nothing behind";
  }
  DoctorReport Run(RckptStandinConfig config) {
    ConfigureCudaStandin(config);
    return RunDoctor({.driver_library = CudaStandinPath()});
  }
};

TEST_F(DoctorTest, AMachineWithoutADriverIsHealthyAndSaysWhy) {
  const DoctorReport r = RunDoctor({.driver_library = "/nonexistent/libcuda.so.1"});
  EXPECT_TRUE(r.cuda_built);
  EXPECT_OK(r.problem);
  EXPECT_TRUE(r.devices.empty());
  EXPECT_THAT(r.no_device_reason, ::testing::HasSubstr("was not found"));
  EXPECT_EQ(r.driver_version, 0);
  EXPECT_FALSE(r.rckpt_version.empty());
  EXPECT_THAT(r.kernel_image, ::testing::HasSubstr("sm_90"));
}

TEST_F(DoctorTest, EachDeviceIsListedByUuidWithNameMemoryAndBusId) {
  const DoctorReport r = Run({.devices = 2, .memory_bytes = 80ull << 30});
  EXPECT_OK(r.problem);
  EXPECT_EQ(r.driver_version, 13000);
  EXPECT_EQ(r.driver_path, CudaStandinPath());
  ASSERT_EQ(r.devices.size(), 2u);
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  for (const DoctorDevice& d : r.devices) {
    EXPECT_TRUE(std::regex_match(d.uuid, uuid)) << d.uuid;
    EXPECT_EQ(d.name, "rckpt stand-in GPU");
    EXPECT_EQ(d.memory_bytes, 80ull << 30);
    EXPECT_EQ(d.compute_major, 9);
  }
  // Only this process's device (no context, no LOCAL_RANK: cuda:0) is
  // examined; the other is listed without a context.
  EXPECT_TRUE(r.devices[0].examined && r.devices[0].kernel_loads) << r.devices[0].kernel_note;
  EXPECT_FALSE(r.devices[1].examined || r.devices[1].kernel_loads);
  EXPECT_NE(r.devices[0].uuid, r.devices[1].uuid);
  EXPECT_EQ(r.devices[0].pci_bus_id, "0000:1A:00.0");
  EXPECT_EQ(r.devices[1].pci_bus_id, "0000:1B:00.0");
  EXPECT_OK(r.pinned_probe);
  EXPECT_EQ(r.pinned_probe_bytes, 64u << 20);
}

TEST_F(DoctorTest, MigInstancesShareTheirGpusBusIdAndHaveTheirSliceOfMemory) {
  const DoctorReport r = Run({.devices = 2, .memory_bytes = 10ull << 30, .mig = 1});
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].pci_bus_id, r.devices[1].pci_bus_id);
  EXPECT_EQ(r.devices[0].memory_bytes, 10ull << 30);
  EXPECT_THAT(r.devices[0].name, ::testing::HasSubstr("MIG"));
}

TEST_F(DoctorTest, AnOldDriverIsAProblemWithTheFix) {
  const DoctorReport r = Run({.driver_version = 11000});
  EXPECT_THAT(r.problem, StatusIs(StatusCode::kDeviceUnavailable, "update the driver"));
  EXPECT_EQ(r.driver_version, 11000);
}

TEST_F(DoctorTest, AKernelThatCannotLoadIsANoteNotAProblem) {
  const DoctorReport r = Run({.kernel_load_error = 209});
  EXPECT_OK(r.problem);
  ASSERT_FALSE(r.devices.empty());
  EXPECT_FALSE(r.devices[0].kernel_loads);
  EXPECT_THAT(r.devices[0].kernel_note, ::testing::HasSubstr("CUDA_ERROR_NO_BINARY_FOR_GPU"));
}

TEST_F(DoctorTest, PinnedMemoryThatCannotBeHadIsAProblem) {
  const DoctorReport r = Run({.pinned_error = 2});
  EXPECT_THAT(r.problem, StatusIs(StatusCode::kDeviceUnavailable, "free host memory"));
  EXPECT_FALSE(r.pinned_probe.ok());
}

TEST_F(DoctorTest, ADeviceWhoseContextCannotBeMadeIsAProblem) {
  const DoctorReport r = Run({.retain_error = 2});
  EXPECT_THAT(r.problem, StatusIs(StatusCode::kDeviceUnavailable, "cuda:0 cannot be used"));
}

TEST_F(DoctorTest, EmptyCudaVisibleDevicesIsNoGpuAndIsReported) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const DoctorReport r = Run({});
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_OK(r.problem);
  EXPECT_TRUE(r.cuda_visible_devices_set);
  EXPECT_TRUE(r.devices.empty());
  EXPECT_THAT(r.no_device_reason, ::testing::HasSubstr("CUDA_VISIBLE_DEVICES"));
}

}  // namespace
}  // namespace rckpt
