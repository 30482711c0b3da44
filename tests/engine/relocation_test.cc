// reference/hippynn.md section 6, groups B, C, D and E, as they apply to
// rckpt: a checkpoint of a run on cuda:1 restored on machines with 0, 1 and
// 2 (emulated) CUDA devices under every relocation option.
#include "engine/engine_test_util.h"
#include "test_runtime.h"

namespace rckpt {
namespace {

using testing::DevicesOf;
using testing::ExpectSameBytes;
using testing::HippynnLike;

constexpr char kPath[] = "/run/best_checkpoint.rckpt";
const Device kCpu = Device::Cpu();
const Device kCuda0 = Device::Cuda(0);
const Device kCuda1 = Device::Cuda(1);

class RelocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = HippynnLike(kCuda1);
    ASSERT_OK(Save(kPath, saved_, SaveOptions{.fs = &fs_}));
  }
  // The copying load (the map_file opt-out); mapped_load_test.cc covers
  // device destinations decoded from the mapping.
  LoadOptions On(EmulatedRuntime* rt) {
    LoadOptions o;
    o.map_file = false;
    o.fs = &fs_;
    o.runtime = rt;
    o.threads = 2;
    return o;
  }
  std::unique_ptr<EmulatedRuntime> Machine(int gpus) {
    return NewTestRuntime({.device_count = gpus});
  }
  // Loads, checks the bytes and the RNG restore, returns the placement.
  std::map<std::string, Device> LoadAndCheck(EmulatedRuntime& rt,
                                             const LoadOptions& o) {
    auto ck = Load(kPath, o);
    EXPECT_TRUE(ck.ok()) << ck.status().ToString();
    if (!ck.ok()) return {};
    ExpectSameBytes(rt, saved_, *ck);
    std::mt19937 engine;
    EXPECT_OK(RestoreEngine(ck->FindRng("torch_rng_state")->bytes, &engine));
    return DevicesOf(*ck);
  }

  MemFileSystem fs_;
  Checkpoint saved_;
};

// B8: both options are an argument error before any file is opened.
TEST_F(RelocationTest, BothOptionsFailBeforeAnyIoEvenForAMissingFile) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.map_location = MapLocation::To(kCpu);
  o.model_device = DeviceSpec::Auto();
  const Status want = Status::InvalidArgument("");
  for (const std::string path : {"/does/not/exist.rckpt", kPath}) {
    EXPECT_THAT(Load(path, o), StatusIs(StatusCode::kInvalidArgument,
                                        "map_location and model_device are "
                                        "incompatible: pass one of them"));
    EXPECT_THAT(PlanLoad(path, o),
                StatusIs(StatusCode::kInvalidArgument, "incompatible"));
    EXPECT_THAT(LoadInto(path, {}, o),
                StatusIs(StatusCode::kInvalidArgument, "incompatible"));
    EXPECT_THAT(ReadTensors(path, {"x"}, o),
                StatusIs(StatusCode::kInvalidArgument, "incompatible"));
  }
}

// B9, D23: auto is cuda:0 with a usable device, cpu without.
TEST_F(RelocationTest, ModelDeviceAutoResolvesByDevicesPresent) {
  auto gpu = Machine(1);
  LoadOptions o = On(gpu.get());
  o.model_device = DeviceSpec::Auto();
  EXPECT_EQ(LoadAndCheck(*gpu, o)["model.layer1.weight"], kCuda0);
  auto cpu_only = Machine(0);
  o = On(cpu_only.get());
  o.model_device = DeviceSpec::Auto();
  auto where = LoadAndCheck(*cpu_only, o);
  for (const auto& [name, device] : where) EXPECT_EQ(device, kCpu) << name;
}

// B10: a malformed device string is a device-spec error.
TEST_F(RelocationTest, MalformedDeviceStringsAreRejected) {
  EXPECT_THAT(DeviceSpec::Parse("cuda:x"),
              StatusIs(StatusCode::kInvalidArgument, "cuda:x"));
  EXPECT_THAT(MapLocation::Parse("cuda:x"),
              StatusIs(StatusCode::kInvalidArgument, "cuda:x"));
}

// C12: as stored on the saving machine, everything returns where it was.
TEST_F(RelocationTest, AsStoredOnTheSavingMachineRestoresOrigins) {
  auto rt = Machine(2);
  auto where = LoadAndCheck(*rt, On(rt.get()));
  EXPECT_EQ(where["model.layer1.weight"], kCuda1);
  EXPECT_EQ(where["optimizer.state.0.exp_avg"], kCuda1);
  EXPECT_EQ(where["optimizer.state.0.step"], kCpu);
  EXPECT_EQ(where["database.features"], kCpu);
}

// C13: as stored on a 1-GPU and a CPU-only machine: our own, clear error.
TEST_F(RelocationTest, AsStoredOnSmallerMachinesNamesTensorDeviceAndFix) {
  auto one = Machine(1);
  EXPECT_THAT(Load(kPath, On(one.get())),
              StatusIs(StatusCode::kDeviceUnavailable,
                       "tensor 'model.layer1.weight' (section 'model') was "
                       "saved on cuda:1, which does not exist here: this "
                       "machine has 1 CUDA device (cuda:0); pass "
                       "model_device=\"auto\""));
  auto none = Machine(0);
  EXPECT_THAT(Load(kPath, On(none.get())),
              StatusIs(StatusCode::kDeviceUnavailable, "no CUDA device"));
  EXPECT_TRUE(one->NothingLive());
  EXPECT_TRUE(none->NothingLive());
}

// C14: map_location=cpu (or an identity-to-cpu callback): all on cpu.
TEST_F(RelocationTest, MapLocationCpuOrCpuCallbackPutsEverythingOnCpu) {
  auto rt = Machine(0);
  LoadOptions o = On(rt.get());
  o.map_location = MapLocation::To(kCpu);
  for (const auto& [name, d] : LoadAndCheck(*rt, o)) EXPECT_EQ(d, kCpu) << name;
  o.map_location = MapLocation::Fn(
      [](const TensorInfo&) { return std::optional<Device>(kCpu); });
  for (const auto& [name, d] : LoadAndCheck(*rt, o)) EXPECT_EQ(d, kCpu) << name;
}

// C15: the explicit tag map.
TEST_F(RelocationTest, TagMapMovesCuda1ToCuda0AndCpuTaggedStay) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda:1=cuda:0"));
  auto where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["model.layer1.weight"], kCuda0);
  EXPECT_EQ(where["loss.weights"], kCuda0);
  EXPECT_EQ(where["optimizer.state.0.exp_avg"], kCuda0);
  EXPECT_EQ(where["optimizer.state.0.step"], kCpu);
  EXPECT_EQ(where["evaluator.loss.scale"], kCpu);
  EXPECT_EQ(where["database.features"], kCpu);
}

// C16: keys that match nothing leave tensors as stored.
TEST_F(RelocationTest, TagMapWithUnmatchedKeysKeepsSavedLocations) {
  auto rt = Machine(2);
  LoadOptions o = On(rt.get());
  o.map_location = MapLocation::Map({{Device::Cuda(5), kCuda0}});
  auto where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["model.layer1.weight"], kCuda1);
}

// C17 (recommended behaviour, decided): map_location to a GPU never moves
// RNG or host-role records, and the load (and RNG restore) succeeds.
TEST_F(RelocationTest, MapLocationToGpuNeverRelocatesHostRecords) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.map_location = MapLocation::To(kCuda0);
  auto where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["model.layer1.weight"], kCuda0);
  EXPECT_EQ(where["database.features"], kCuda0);  // data role follows the map
  EXPECT_EQ(where["optimizer.state.0.step"], kCpu);
  EXPECT_EQ(where["metrics.best_model.layer1.weight"], kCpu);
  o.map_location = MapLocation::Fn(
      [](const TensorInfo&) { return std::optional<Device>(kCuda0); });
  where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["optimizer.state.0.step"], kCpu);
}

// C18: a callback returning nothing falls back to the stored location.
TEST_F(RelocationTest, CallbackReturningNothingFallsBackToStored) {
  auto rt = Machine(2);
  LoadOptions o = On(rt.get());
  o.map_location = MapLocation::Fn([](const TensorInfo& i) {
    return i.section == "loss" ? std::optional<Device>(kCuda0) : std::nullopt;
  });
  auto where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["loss.weights"], kCuda0);
  EXPECT_EQ(where["model.layer1.weight"], kCuda1);
}

// D20: model_device=cuda:0 for a cuda:1 checkpoint.
TEST_F(RelocationTest, ModelDeviceMovesModelSideOnlyKeepingHostStateOnCpu) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.model_device = DeviceSpec::Of(kCuda0);
  auto where = LoadAndCheck(*rt, o);
  EXPECT_EQ(where["model.layer1.weight"], kCuda0);
  EXPECT_EQ(where["loss.weights"], kCuda0);
  EXPECT_EQ(where["optimizer.state.0.exp_avg"], kCuda0);
  EXPECT_EQ(where["optimizer.state.0.step"], kCpu);
  EXPECT_EQ(where["metrics.best_model.layer1.weight"], kCpu);
  EXPECT_EQ(where["evaluator.loss.scale"], kCpu);
  EXPECT_EQ(where["database.features"], kCpu);
}

// D22: model_device=cpu: everything on cpu.
TEST_F(RelocationTest, ModelDeviceCpuLeavesEverythingOnHost) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.model_device = DeviceSpec::Of(kCpu);
  for (const auto& [name, d] : LoadAndCheck(*rt, o)) EXPECT_EQ(d, kCpu) << name;
}

// D25: the result does not depend on which GPU wrote the checkpoint.
TEST_F(RelocationTest, ModelDeviceResultIndependentOfTheSavingGpu) {
  Checkpoint from0 = HippynnLike(kCuda0);
  ASSERT_OK(Save("/run/from0.rckpt", from0, SaveOptions{.fs = &fs_}));
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(Checkpoint a, Load(kPath, o));
  ASSERT_OK_AND_ASSIGN(Checkpoint b, Load("/run/from0.rckpt", o));
  EXPECT_EQ(DevicesOf(a), DevicesOf(b));
}

// A model_device that does not exist is named before the file is opened.
TEST_F(RelocationTest, MissingModelDeviceIsNamedBeforeOpening) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.model_device = DeviceSpec::Of(Device::Cuda(7));
  EXPECT_THAT(Load("/no/such/file", o),
              StatusIs(StatusCode::kDeviceUnavailable,
                       "model_device cuda:7 does not exist"));
}

// E26: after the load the CPU generator continues the saved sequence.
TEST_F(RelocationTest, RngStateContinuesTheOriginalSequenceUnderEveryPolicy) {
  auto rt = Machine(1);
  std::vector<LoadOptions> policies(3, On(rt.get()));
  policies[0].map_location = MapLocation::To(kCuda0);
  policies[1].model_device = DeviceSpec::Auto();
  policies[2].map_location = MapLocation::Map({{kCuda1, kCuda0}});
  for (const LoadOptions& o : policies) {
    ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
    std::mt19937 restored, original(1234);
    original.discard(77);
    ASSERT_OK(RestoreEngine(ck.FindRng("torch_rng_state")->bytes, &restored));
    EXPECT_EQ(restored(), original());
  }
}

// Section selection: restore_db=False is skip_sections={"database"}.
TEST_F(RelocationTest, RestoreDbFalseIsSkippingTheDatabaseSection) {
  auto rt = Machine(1);
  LoadOptions o = On(rt.get());
  o.model_device = DeviceSpec::Auto();
  o.skip_sections = {"database"};
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(kPath, o));
  EXPECT_EQ(ck.FindTensor("database.features"), nullptr);
  EXPECT_NE(ck.FindTensor("model.layer1.weight"), nullptr);
  o.skip_sections = {"databse"};
  EXPECT_THAT(Load(kPath, o), StatusIs(StatusCode::kInvalidArgument,
                                       "unknown section 'databse'"));
}

}  // namespace
}  // namespace rckpt
