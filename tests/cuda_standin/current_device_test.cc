// The process's own device over the stand-in driver, as an 8-GPU torchrun
// job meets it: four devices, this process's current device cuda:3. A bare
// "cuda" loads there, a thread without a context falls back to the
// launcher's local rank, the doctor examines that device alone, and no
// other device's primary context is ever retained (each costs its GPU about
// half a GiB on a real driver). Also the driver minimum of the kernel image.
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "rckpt/doctor.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "runtime_fixture.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

// Sets an environment variable for one scope, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class CurrentDeviceTest : public StandinRuntimeTest {
 protected:
  void SetUp() override { Configure({.devices = 4}); }
  void TearDown() override {
    SetCudaStandinCurrentDevice(-1);
    if (runtime_ != nullptr) runtime_->ReleasePool();
    StandinRuntimeTest::TearDown();
  }

  // A checkpoint of a model tensor and an optimizer tensor, saved from the
  // host (origin cpu).
  void SaveState() {
    Checkpoint ck;
    ASSERT_OK(ck.AddTensor("model", "w", *Tensor::Zeros(DType::kF32, {1024})));
    ASSERT_OK(ck.AddTensor("optimizer", "m", *Tensor::Zeros(DType::kF32, {256})));
    SaveOptions so;
    so.fs = &fs_;
    ASSERT_OK(Save("/s.rckpt", ck, so));
  }

  // Loads with `o` and returns each tensor's device as the stand-in saw its
  // memory ("cpu" for host tensors).
  Result<std::map<std::string, std::string>> LoadAndLocate(LoadOptions o) {
    o.fs = &fs_;
    o.runtime = &Runtime();
    RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, Load("/s.rckpt", o));
    std::map<std::string, std::string> out;
    for (const TensorEntry& e : ck.tensors()) {
      const Tensor& t = e.tensor;
      if (t.device().is_cpu()) {
        out[e.name] = "cpu";
        continue;
      }
      const int standin = CudaStandinDeviceOf(t.data());
      out[e.name] = t.device().ToString() + (standin == t.device().index ? "" : " (memory elsewhere)");
    }
    return out;
  }

  // The devices whose primary context was retained since the last configure.
  static std::string Retained() {
    const RckptStandinStats s = CudaStandinStats();
    std::string out;
    for (int d = 0; d < 8; ++d) {
      if (s.retains_per_device[d] == 0) continue;
      if (!out.empty()) out += ",";
      out += "cuda:" + std::to_string(d);
    }
    return out;
  }

  MemFileSystem fs_;
};

TEST_F(CurrentDeviceTest, BareCudaLoadsOntoTheCurrentDeviceAndTouchesNoOther) {
  SaveState();
  SetCudaStandinCurrentDevice(3);  // as torch.cuda.set_device(3) on rank 3
  for (const char* spec : {"map_location", "model_device", "tag map"}) {
    SCOPED_TRACE(spec);
    Configure({.devices = 4});
    SetCudaStandinCurrentDevice(3);
    LoadOptions o;
    if (std::string(spec) == "map_location") {
      ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda"));
    } else if (std::string(spec) == "model_device") {
      ASSERT_OK_AND_ASSIGN(o.model_device, DeviceSpec::Parse("cuda"));
    } else {
      ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cpu=cuda"));
    }
    ASSERT_OK_AND_ASSIGN(auto where, LoadAndLocate(o));
    EXPECT_EQ(where["w"], "cuda:3");
    EXPECT_EQ(where["m"], "cuda:3");
    runtime_->ReleasePool();
    EXPECT_EQ(Retained(), "cuda:3") << "no context on another rank's GPU";
  }
}

TEST_F(CurrentDeviceTest, AThreadWithoutAContextFallsBackToTheLocalRank) {
  SaveState();
  ScopedEnv rank("LOCAL_RANK", "2");
  std::map<std::string, std::string> where;
  Status status;
  std::thread loader([&] {  // a loader thread: the main thread's context is not its own
    LoadOptions o;
    o.model_device = DeviceSpec::Auto();
    Result<std::map<std::string, std::string>> r = LoadAndLocate(o);
    status = r.status();
    if (r.ok()) where = *r;
  });
  loader.join();
  ASSERT_OK(status);
  EXPECT_EQ(where["w"], "cuda:2");
  runtime_->ReleasePool();
  EXPECT_EQ(Retained(), "cuda:2");
}

TEST_F(CurrentDeviceTest, WithoutAContextTheCurrentDeviceIsTheLocalRanksElseTheFirst) {
  {
    ScopedEnv rank("LOCAL_RANK", nullptr);
    ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
    EXPECT_EQ(current, 0);
  }
  {
    ScopedEnv rank("LOCAL_RANK", "3");
    ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
    EXPECT_EQ(current, 3);
  }
  {
    // One GPU per process through CUDA_VISIBLE_DEVICES: rank 6 sees only
    // its own, as cuda:0 (here: 4 visible, rank 6 is none of them).
    ScopedEnv rank("LOCAL_RANK", "6");
    ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
    EXPECT_EQ(current, 0);
  }
  {
    ScopedEnv rank("LOCAL_RANK", "3");
    SetCudaStandinCurrentDevice(1);  // a context wins over the launcher's word
    ASSERT_OK_AND_ASSIGN(int current, Runtime().CurrentDevice());
    EXPECT_EQ(current, 1);
  }
  EXPECT_EQ(CudaStandinContextDepth(), 1) << "the caller's context is left as it was";
}

TEST_F(CurrentDeviceTest, TheDoctorExaminesTheCurrentDeviceAndPinsThroughItAlone) {
  SetCudaStandinCurrentDevice(3);
  const DoctorReport r = RunDoctor({.driver_library = CudaStandinPath()});
  EXPECT_OK(r.problem);
  ASSERT_EQ(r.devices.size(), 4u) << "every device is listed";
  EXPECT_EQ(r.current_device, 3);
  for (const DoctorDevice& d : r.devices) {
    EXPECT_EQ(d.examined, d.index == 3) << d.index;
    EXPECT_EQ(d.kernel_loads, d.index == 3) << d.index;
  }
  EXPECT_OK(r.pinned_probe);
  EXPECT_EQ(Retained(), "cuda:3") << "no context made on another GPU, the pinned probe's included";
  EXPECT_EQ(CudaStandinStats().retained_contexts, 0) << "and nothing left retained";
}

TEST_F(CurrentDeviceTest, TheDoctorExaminesEveryDeviceOnlyWhenAsked) {
  SetCudaStandinCurrentDevice(3);
  const DoctorReport r =
      RunDoctor({.driver_library = CudaStandinPath()}, {.all_devices = true});
  EXPECT_OK(r.problem);
  EXPECT_TRUE(r.all_devices);
  for (const DoctorDevice& d : r.devices) EXPECT_TRUE(d.examined && d.kernel_loads) << d.index;
  EXPECT_EQ(Retained(), "cuda:0,cuda:1,cuda:2,cuda:3");
  EXPECT_EQ(CudaStandinStats().retained_contexts, 0);
}

TEST_F(CurrentDeviceTest, TheDoctorExaminesTheDeviceItIsGiven) {
  const DoctorReport r = RunDoctor({.driver_library = CudaStandinPath()}, {.device = 2});
  EXPECT_EQ(r.current_device, 2);
  EXPECT_EQ(Retained(), "cuda:2");
  const DoctorReport missing = RunDoctor({.driver_library = CudaStandinPath()}, {.device = 7});
  EXPECT_THAT(missing.problem, StatusIs(StatusCode::kDeviceUnavailable, "cuda:7, does not exist"));
}

TEST_F(CurrentDeviceTest, ACuda12DriverUnshufflesOnTheDevice) {
  // R535 (CUDA 12.2), what most H100 fleets run: the image's CUDA 12 cubins load.
  Configure({.devices = 4, .driver_version = 12020});
  std::string why;
  EXPECT_TRUE(Runtime().CanUnshuffle(Device::Cuda(0), &why)) << why;
  const DoctorReport r = RunDoctor({.driver_library = CudaStandinPath()}, {.device = 0});
  EXPECT_EQ(r.kernel_min_driver_version, 12000);
  EXPECT_THAT(r.kernel_min_driver_why, ::testing::HasSubstr("R525"));
  ASSERT_FALSE(r.devices.empty());
  EXPECT_TRUE(r.devices[0].kernel_loads) << r.devices[0].kernel_note;
}

}  // namespace
}  // namespace rckpt
