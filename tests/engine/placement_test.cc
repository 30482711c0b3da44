// The placement planner alone: every row of docs/DESIGN.md §4's tables on
// hand-built manifests, without files or runtimes.
#include "engine/placement.h"

#include "runtime/emulated_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

// A machine of `count` devices, for one check.
DeviceInventory& Assumed(int count) {
  static DeviceInventory devices = DeviceInventory::Assumed(0);
  devices = DeviceInventory::Assumed(count);
  return devices;
}

TensorMeta Meta(std::string name, std::string section, Role role, Device origin,
                Shape shape = {4}) {
  TensorMeta t;
  t.name = std::move(name);
  t.section = std::move(section);
  t.role = role;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.origin = origin;
  t.nbytes = 16;
  return t;
}

class PlacementTest : public ::testing::Test {
 protected:
  PlacementTest() {
    sections_ = {{"model", Role::kModel},
                 {"optimizer", Role::kModel},
                 {"metrics", Role::kHost},
                 {"database", Role::kData}};
    tensors_ = {
        Meta("w", "model", Role::kModel, Device::Cuda(1)),
        Meta("exp_avg", "optimizer", Role::kModel, Device::Cuda(1)),
        Meta("step", "optimizer", Role::kHost, Device::Cpu(), {}),
        Meta("best.w", "metrics", Role::kHost, Device::Cuda(1)),
        Meta("db.x", "database", Role::kData, Device::Cuda(1)),
    };
    RngRecord r;
    r.name = "torch_rng_state";
    r.origin = Device::Cpu();
    RngRecord c;
    c.name = "cuda_rng_state";
    c.origin = Device::Cuda(1);
    rng_ = {r, c};
  }

  Result<std::map<std::string, Device>> Targets(const LoadOptions& o,
                                                int count) {
    DeviceInventory devices = DeviceInventory::Assumed(count);
    RCKPT_RETURN_IF_ERROR(CheckLoadOptions(o, devices));
    RCKPT_ASSIGN_OR_RETURN(
        LoadPlan plan, PlanPlacements(sections_, tensors_, rng_, o, devices));
    std::map<std::string, Device> out;
    for (const Placement& p : plan.placements) out[p.name] = p.target;
    return out;
  }

  std::vector<SectionInfo> sections_;
  std::vector<TensorMeta> tensors_;
  std::vector<RngRecord> rng_;
};

const Device kCpu = Device::Cpu();
const Device kCuda0 = Device::Cuda(0);
const Device kCuda1 = Device::Cuda(1);

TEST_F(PlacementTest, AsStoredPutsEveryTensorOnItsOriginExceptHostRecords) {
  ASSERT_OK_AND_ASSIGN(auto t, Targets({}, 2));
  EXPECT_EQ(t["w"], kCuda1);
  EXPECT_EQ(t["exp_avg"], kCuda1);
  EXPECT_EQ(t["db.x"], kCuda1);
  EXPECT_EQ(t["step"], kCpu);
  EXPECT_EQ(t["best.w"], kCpu);  // host role, although saved on cuda:1
  EXPECT_EQ(t["torch_rng_state"], kCpu);
  EXPECT_EQ(t["cuda_rng_state"], kCpu);
}

TEST_F(PlacementTest, AsStoredMissingDeviceNamesTensorDeviceCountAndFixes) {
  auto r = Targets({}, 1);
  EXPECT_THAT(r, StatusIs(StatusCode::kDeviceUnavailable,
                          "tensor 'w' (section 'model') was saved on cuda:1"));
  const std::string m = r.status().message();
  EXPECT_THAT(m, ::testing::HasSubstr("1 CUDA device (cuda:0)"));
  EXPECT_THAT(m, ::testing::HasSubstr("model_device=\"auto\""));
  EXPECT_THAT(m, ::testing::HasSubstr("map_location"));
  EXPECT_THAT(m, ::testing::HasSubstr("{\"cuda:1\": \"cuda:0\"}"));
}

TEST_F(PlacementTest, AsStoredOnCpuOnlyMachineSaysNoCudaDevice) {
  auto r = Targets({}, 0);
  EXPECT_THAT(r, StatusIs(StatusCode::kDeviceUnavailable, "no CUDA device"));
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("{\"cuda:1\": \"cpu\"}"));
}

TEST_F(PlacementTest, HostRecordsNeverRaiseDeviceUnavailable) {
  // Only host-role tensors and RNG records saved on a missing device.
  tensors_ = {Meta("best.w", "metrics", Role::kHost, Device::Cuda(5))};
  ASSERT_OK_AND_ASSIGN(auto t, Targets({}, 0));
  EXPECT_EQ(t["best.w"], kCpu);
  EXPECT_EQ(t["cuda_rng_state"], kCpu);
}

TEST_F(PlacementTest, MapLocationDeviceSendsModelAndDataThereHostStays) {
  LoadOptions o;
  o.map_location = MapLocation::To(kCuda0);
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 1));
  EXPECT_EQ(t["w"], kCuda0);
  EXPECT_EQ(t["exp_avg"], kCuda0);
  EXPECT_EQ(t["db.x"], kCuda0);
  EXPECT_EQ(t["step"], kCpu);
  EXPECT_EQ(t["best.w"], kCpu);
  EXPECT_EQ(t["torch_rng_state"], kCpu);  // the seed's bug cannot happen
}

TEST_F(PlacementTest, MapLocationCpuPutsEverythingOnCpu) {
  LoadOptions o;
  o.map_location = MapLocation::To(kCpu);
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 0));
  for (const auto& [name, device] : t) EXPECT_EQ(device, kCpu) << name;
}

TEST_F(PlacementTest, TagMapMovesExactMatchesOnly) {
  tensors_.push_back(Meta("other", "model", Role::kModel, kCuda0));
  LoadOptions o;
  o.map_location = MapLocation::Map({{kCuda1, kCuda0}});
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 1));
  EXPECT_EQ(t["w"], kCuda0);
  EXPECT_EQ(t["db.x"], kCuda0);
  EXPECT_EQ(t["other"], kCuda0);
  EXPECT_EQ(t["step"], kCpu);
}

TEST_F(PlacementTest, TagMapWithoutMatchingKeysLeavesTensorsAsStored) {
  LoadOptions o;
  o.map_location = MapLocation::Map({{Device::Cuda(5), kCuda0}});
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 2));
  EXPECT_EQ(t["w"], kCuda1);
  EXPECT_EQ(t["db.x"], kCuda1);
}

TEST_F(PlacementTest, CallbackSeesTensorInfoAndNulloptMeansAsStored) {
  std::vector<std::string> seen;
  LoadOptions o;
  o.map_location = MapLocation::Fn([&](const TensorInfo& info) {
    seen.push_back(info.name);
    EXPECT_EQ(info.dtype, DType::kF32);
    EXPECT_EQ(info.origin, kCuda1);
    if (info.section == "model") return std::optional<Device>(kCpu);
    return std::optional<Device>();
  });
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 2));
  EXPECT_EQ(t["w"], kCpu);
  EXPECT_EQ(t["exp_avg"], kCuda1);  // nullopt: as stored
  // Host-role tensors and RNG records are never offered to the callback.
  EXPECT_THAT(seen, ::testing::ElementsAre("w", "exp_avg", "db.x"));
}

TEST_F(PlacementTest, MapTargetThatDoesNotExistIsNamed) {
  LoadOptions o;
  o.map_location = MapLocation::To(Device::Cuda(7));
  EXPECT_THAT(Targets(o, 1),
              StatusIs(StatusCode::kDeviceUnavailable,
                       "sends it to cuda:7, which does not exist: this "
                       "machine has 1 CUDA device"));
}

TEST_F(PlacementTest, ModelDeviceMovesModelRoleDataToHost) {
  LoadOptions o;
  o.model_device = DeviceSpec::Of(kCuda0);
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 1));
  EXPECT_EQ(t["w"], kCuda0);
  EXPECT_EQ(t["exp_avg"], kCuda0);
  EXPECT_EQ(t["step"], kCpu);
  EXPECT_EQ(t["best.w"], kCpu);
  EXPECT_EQ(t["db.x"], kCpu);
  EXPECT_EQ(t["torch_rng_state"], kCpu);
}

TEST_F(PlacementTest, ModelDeviceAutoIsCuda0WithDevicesElseCpu) {
  LoadOptions o;
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(auto with, Targets(o, 2));
  EXPECT_EQ(with["w"], kCuda0);
  ASSERT_OK_AND_ASSIGN(auto without, Targets(o, 0));
  EXPECT_EQ(without["w"], kCpu);
  EXPECT_EQ(without["exp_avg"], kCpu);
}

TEST_F(PlacementTest, AutoIsTheCallingThreadsCurrentDevice) {
  auto rt = NewEmulatedRuntimeForTesting({.device_count = 2});
  rt->SetCurrentDevice(1);
  DeviceInventory devices(*rt, nullptr);
  LoadOptions o;
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, PlanPlacements(sections_, tensors_, rng_, o, devices));
  std::map<std::string, Device> t;
  for (const Placement& p : plan.placements) t[p.name] = p.target;
  EXPECT_EQ(t["w"], Device::Cuda(1));
  EXPECT_EQ(t["exp_avg"], Device::Cuda(1));
  EXPECT_EQ(t["db.x"], kCpu);
}

TEST_F(PlacementTest, AutoFollowsTheDeviceTheCallerSays) {
  auto rt = NewEmulatedRuntimeForTesting({.device_count = 4});
  DeviceInventory devices(*rt, [](int) -> Result<int> { return 3; });
  LoadOptions o;
  o.model_device = DeviceSpec::Auto();
  ASSERT_OK_AND_ASSIGN(LoadPlan plan, PlanPlacements(sections_, tensors_, rng_, o, devices));
  EXPECT_EQ(plan.placements[0].target, Device::Cuda(3));
}

TEST_F(PlacementTest, ACurrentDeviceThatDoesNotExistIsAnError) {
  auto rt = NewEmulatedRuntimeForTesting({.device_count = 2});
  DeviceInventory devices(*rt, [](int) -> Result<int> { return 5; });
  LoadOptions o;
  o.model_device = DeviceSpec::Auto();
  EXPECT_THAT(PlanPlacements(sections_, tensors_, rng_, o, devices),
              StatusIs(StatusCode::kDeviceUnavailable, "current device cuda:5 does not exist"));
}

// Under torchrun every rank has set its own device (torch.cuda.set_device(
// local_rank)); a bare "cuda" is that device wherever a device is given, as
// torch.load's map_location="cuda" is, never cuda:0.
class BareCudaTest : public PlacementTest {
 protected:
  BareCudaTest() : rt_(NewEmulatedRuntimeForTesting({.device_count = 4})) {
    rt_->SetCurrentDevice(3);
  }
  ~BareCudaTest() override { rt_->SetCurrentDevice(0); }

  Result<std::map<std::string, Device>> Placed(const LoadOptions& o) {
    DeviceInventory devices(*rt_, nullptr);
    RCKPT_RETURN_IF_ERROR(CheckLoadOptions(o, devices));
    RCKPT_ASSIGN_OR_RETURN(LoadPlan plan, PlanPlacements(sections_, tensors_, rng_, o, devices));
    std::map<std::string, Device> out;
    for (const Placement& p : plan.placements) out[p.name] = p.target;
    return out;
  }

  std::unique_ptr<EmulatedRuntime> rt_;
};

TEST_F(BareCudaTest, MapLocationCudaIsTheCurrentDevice) {
  LoadOptions o;
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda"));
  ASSERT_OK_AND_ASSIGN(auto t, Placed(o));
  EXPECT_EQ(t["w"], Device::Cuda(3));
  EXPECT_EQ(t["db.x"], Device::Cuda(3));
  EXPECT_EQ(t["best.w"], kCpu);
}

TEST_F(BareCudaTest, ModelDeviceCudaIsTheCurrentDevice) {
  LoadOptions o;
  ASSERT_OK_AND_ASSIGN(o.model_device, DeviceSpec::Parse("cuda"));
  ASSERT_OK_AND_ASSIGN(auto t, Placed(o));
  EXPECT_EQ(t["w"], Device::Cuda(3));
  EXPECT_EQ(t["exp_avg"], Device::Cuda(3));
  EXPECT_EQ(t["db.x"], kCpu);
}

TEST_F(BareCudaTest, ATagMapsCudaIsTheCurrentDeviceAsKeyAndAsTarget) {
  LoadOptions o;
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda:1=cuda"));
  ASSERT_OK_AND_ASSIGN(auto t, Placed(o));
  EXPECT_EQ(t["w"], Device::Cuda(3));
  rt_->SetCurrentDevice(1);  // the rank that saved them: its own tensors, to the CPU
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda=cpu"));
  ASSERT_OK_AND_ASSIGN(t, Placed(o));
  EXPECT_EQ(t["w"], kCpu);
}

TEST_F(BareCudaTest, ACallbacksCudaIsTheCurrentDevice) {
  LoadOptions o;
  o.map_location = MapLocation::Fn([](const TensorInfo&) { return Device::CurrentCuda(); });
  ASSERT_OK_AND_ASSIGN(auto t, Placed(o));
  EXPECT_EQ(t["w"], Device::Cuda(3));
}

TEST_F(BareCudaTest, ATagMapNamingTheCurrentDeviceTwiceIsAnError) {
  LoadOptions o;
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda=cpu,cuda:3=cuda:0"));
  EXPECT_THAT(Placed(o), StatusIs(StatusCode::kInvalidArgument,
                                  "cuda:3 is mapped twice: as \"cuda\" (the current device)"));
}

TEST_F(PlacementTest, CudaWithoutAGpuIsUnavailableNotCuda0) {
  auto rt = NewEmulatedRuntimeForTesting({.device_count = 0});
  LoadOptions o;
  ASSERT_OK_AND_ASSIGN(o.map_location, MapLocation::Parse("cuda"));
  DeviceInventory devices(*rt, nullptr);
  EXPECT_THAT(PlanPlacements(sections_, tensors_, rng_, o, devices),
              StatusIs(StatusCode::kDeviceUnavailable,
                       "map_location cuda: \"cuda\" is the current CUDA device, and this machine "
                       "has no CUDA device"));
}

TEST_F(PlacementTest, ATagMapWithoutTheOriginNamesTheSavedDevicesAndExactKeys) {
  LoadOptions o;
  o.map_location = MapLocation::Map({{Device::Cuda(0), kCpu}});  // {"cuda:0": "cpu"}
  auto r = Targets(o, 0);
  EXPECT_THAT(r, StatusIs(StatusCode::kDeviceUnavailable,
                          "has no entry for (keys are exact device tags; \"cuda\" means the "
                          "current device)"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("saved on cuda:1"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("saved on cpu, cuda:1"));
  EXPECT_THAT(r.status().message(), ::testing::Not(::testing::HasSubstr("sends")));
}

TEST_F(PlacementTest, AMappedTargetThatDoesNotExistSaysWhereTheMapSentIt) {
  LoadOptions o;
  o.map_location = MapLocation::Map({{Device::Cuda(1), Device::Cuda(3)}});
  EXPECT_THAT(Targets(o, 2), StatusIs(StatusCode::kDeviceUnavailable,
                                      "cuda:1=cuda:3 sends it to cuda:3, which does not exist"));
}

TEST_F(PlacementTest, ModelDeviceThatDoesNotExistIsNamedWithTheCount) {
  LoadOptions o;
  o.model_device = DeviceSpec::Of(Device::Cuda(7));
  EXPECT_THAT(CheckLoadOptions(o, Assumed(1)),
              StatusIs(StatusCode::kDeviceUnavailable,
                       "model_device cuda:7 does not exist: this machine has "
                       "1 CUDA device (cuda:0)"));
}

TEST_F(PlacementTest, BothOptionsAreInvalidWhateverTheirValues) {
  LoadOptions o;
  o.map_location = MapLocation::To(kCpu);
  o.model_device = DeviceSpec::Of(kCpu);
  EXPECT_THAT(CheckLoadOptions(o, Assumed(0)),
              StatusIs(StatusCode::kInvalidArgument,
                       "map_location and model_device are incompatible"));
}

TEST_F(PlacementTest, ZeroStagingBytesIsInvalid) {
  LoadOptions o;
  o.staging_bytes = 0;
  EXPECT_THAT(CheckLoadOptions(o, Assumed(0)),
              StatusIs(StatusCode::kInvalidArgument, "staging_bytes"));
}

TEST_F(PlacementTest, SectionsSelectAndSkipSectionsRemove) {
  LoadOptions o;
  o.sections = {"model", "database"};
  o.skip_sections = {"database"};
  ASSERT_OK_AND_ASSIGN(auto t, Targets(o, 2));
  EXPECT_EQ(t.count("w"), 1u);
  EXPECT_EQ(t.count("db.x"), 0u);
  EXPECT_EQ(t.count("exp_avg"), 0u);
  EXPECT_EQ(t.count("torch_rng_state"), 1u);  // RNG records always come back
}

TEST_F(PlacementTest, UnknownSectionListsTheFilesOwnSectionsAndTheClosestName) {
  sections_.push_back({"custom", Role::kData});
  LoadOptions o;
  o.skip_sections = {"databse"};
  auto r = Targets(o, 2);
  EXPECT_THAT(r, StatusIs(StatusCode::kInvalidArgument,
                          "skip_sections: unknown section 'databse' (did you mean 'database'?)"));
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("this file's sections: model, optimizer, metrics, database, custom"));
  EXPECT_THAT(r.status().message(), ::testing::Not(::testing::HasSubstr("scheduler")))
      << "canonical names the file lacks are not listed";
}

TEST_F(PlacementTest, CanonicalSectionMissingFromFileIsAccepted) {
  sections_ = {{"model", Role::kModel}};
  tensors_ = {Meta("w", "model", Role::kModel, kCpu)};
  LoadOptions o;
  o.skip_sections = {"database"};  // hippynn's restore_db=False, no database
  EXPECT_OK(Targets(o, 0).status());
}

TEST_F(PlacementTest, DeviceCountDescriptions) {
  EXPECT_EQ(DescribeCudaDevices(0), "no CUDA device");
  EXPECT_EQ(DescribeCudaDevices(1), "1 CUDA device (cuda:0)");
  EXPECT_EQ(DescribeCudaDevices(4), "4 CUDA devices (cuda:0 to cuda:3)");
}

}  // namespace
}  // namespace rckpt
