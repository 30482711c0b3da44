// The restart workflow end to end: rckpt-train-demo runs as a child process,
// is crashed (after a step, or in the middle of a checkpoint write), resumed
// with every placement option, and its final checkpoint is compared with the
// one of a run that never stopped.
#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "restart_fixture.h"

namespace rckpt::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::IsEmpty;

TEST_F(RestartTest, UninterruptedRunsAreBitIdenticalAndSeedMatters) {
  std::string a = Baseline();
  std::string b = Baseline();
  ExpectIdentical(a, b);
  // The comparison sees a different run.
  std::string other = Baseline({"--seed", "2"});
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> diffs, CompareCheckpoints(a, other, true));
  EXPECT_THAT(diffs, ::testing::Not(IsEmpty()));
}

TEST_F(RestartTest, CheckpointHoldsTheWholeTrainingState) {
  std::string ckpt = CrashAfter(10);
  EXPECT_EQ(StoredStep(ckpt), 8);
  LoadOptions options;
  options.map_location = MapLocation::To(Device::Cpu());
  ASSERT_OK_AND_ASSIGN(Checkpoint ck, Load(ckpt, options));
  for (const char* section : {"model", "loss", "optimizer", "metrics", "database"}) {
    EXPECT_NE(ck.FindSection(section), nullptr) << section;
  }
  const TensorEntry* step = ck.FindTensor("optimizer.state.0.step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->role, Role::kHost);  // 0-d step counters are host-role
  EXPECT_EQ(step->tensor.host_span<int64_t>()[0], 8);
  const TensorEntry* moment = ck.FindTensor("optimizer.state.0.exp_avg");
  ASSERT_NE(moment, nullptr);
  EXPECT_EQ(moment->role, Role::kModel);
  EXPECT_EQ(ck.FindTensor("metrics.best_model.fc1.weight")->role, Role::kHost);
  EXPECT_EQ(ck.FindTensor("database.order")->role, Role::kData);
  for (const char* rng : {"rng.data", "rng.init", "rng.shuffle", "rng.dropout"}) {
    const RngRecord* r = ck.FindRng(rng);
    ASSERT_NE(r, nullptr) << rng;
    EXPECT_EQ(r->kind, RngKind::kMt19937_64);
  }
}

class StopPointTest : public RestartTest, public ::testing::WithParamInterface<int> {};

TEST_P(StopPointTest, StoppedAndResumedRunEndsIdentical) {
  const int stop = GetParam();
  std::string baseline = Baseline();
  std::string ckpt = CrashAfter(stop);
  EXPECT_EQ(StoredStep(ckpt), stop / kEvery * kEvery);
  ExpectIdentical(baseline, Resume(ckpt, {}));
}

// Mid-epoch, on a checkpoint step, on an epoch boundary (15 steps), later.
INSTANTIATE_TEST_SUITE_P(SeveralStopPoints, StopPointTest,
                         ::testing::Values(5, 8, 15, 17, 31, 39));

struct PlacementCase {
  const char* label;
  std::vector<std::string> args;
};
void PrintTo(const PlacementCase& c, std::ostream* os) { *os << c.label; }

class CpuPlacementTest : public RestartTest,
                         public ::testing::WithParamInterface<PlacementCase> {};

TEST_P(CpuPlacementTest, ResumeEndsIdenticalUnderEveryCpuOption) {
  const PlacementCase& c = GetParam();
  std::string baseline = Baseline();
  std::string ckpt = CrashAfter(18);
  std::string final_path = Resume(ckpt, c.args);
  // On a machine with a GPU, auto moves the model side to cuda:0.
  bool moves = c.args == std::vector<std::string>{"--model-device", "auto"} &&
               RealDeviceCount() > 0;
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/moves);
}

INSTANTIATE_TEST_SUITE_P(
    Options, CpuPlacementTest,
    ::testing::Values(PlacementCase{"AsStored", {}},
                      PlacementCase{"ModelDeviceAuto", {"--model-device", "auto"}},
                      PlacementCase{"ModelDeviceCpu", {"--model-device", "cpu"}},
                      PlacementCase{"MapLocationCpu", {"--map-location", "cpu"}},
                      PlacementCase{"TagMap", {"--map-location", "cuda:1=cuda:0"}},
                      PlacementCase{"TagMapToCpu", {"--map-location", "cuda:0=cpu,cuda:1=cpu"}}),
    [](const auto& info) { return std::string(info.param.label); });

const std::vector<std::string> kOnEmulatedCuda1 = {"--emulate-devices", "2", "--device",
                                                   "cuda:1"};

TEST_F(RestartTest, Cuda1CheckpointRecordsItsDevices) {
  std::string ckpt = CrashAfter(18, kOnEmulatedCuda1);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(ckpt));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(1));
  EXPECT_EQ(origins["loss.log_var"], Device::Cuda(1));
  EXPECT_EQ(origins["optimizer.state.2.exp_avg_sq"], Device::Cuda(1));
  EXPECT_EQ(origins["database.x"], Device::Cuda(1));
  EXPECT_EQ(origins["optimizer.state.2.step"], Device::Cpu());
  EXPECT_EQ(origins["metrics.best_model.fc1.weight"], Device::Cpu());
  EXPECT_EQ(origins["rng.dropout"], Device::Cpu());
}

TEST_F(RestartTest, Cuda1CheckpointWithoutThatDeviceFailsClearlyWithoutOptions) {
  if (RealDeviceCount() > 1) GTEST_SKIP() << "this machine has a real cuda:1";
  std::string ckpt = CrashAfter(18, kOnEmulatedCuda1);
  ProcessResult r = Demo({"--resume", ckpt, "--steps", std::to_string(kSteps)});
  EXPECT_EQ(r.exit_code, 6) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("DeviceUnavailable"));
  EXPECT_THAT(r.err, HasSubstr("cuda:1"));
  // One line, naming the demo's own flags (not the library's option fields).
  EXPECT_THAT(r.err, HasSubstr("pass --model-device auto"));
  EXPECT_THAT(r.err, HasSubstr("--map-location"));
  EXPECT_THAT(r.err, Not(HasSubstr("model_device")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(RestartTest, Cuda1CheckpointResumesIdenticalWithModelDeviceAuto) {
  std::string baseline = Baseline(kOnEmulatedCuda1);
  std::string ckpt = CrashAfter(18, kOnEmulatedCuda1);
  std::string final_path = Resume(ckpt, {"--model-device", "auto"});
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/true);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(final_path));
  Device expected = RealDeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu();
  EXPECT_EQ(origins["model.fc1.weight"], expected);
  EXPECT_EQ(origins["optimizer.state.0.exp_avg"], expected);
  EXPECT_EQ(origins["database.x"], Device::Cpu());  // data role: host
}

TEST_F(RestartTest, Cuda1RunResumedOnHostAndBackEndsIdentical) {
  std::string baseline = Baseline(kOnEmulatedCuda1);
  std::string on_cuda1 = CrashAfter(10, kOnEmulatedCuda1);
  // Continued on a machine without GPUs: its checkpoints are host-tagged.
  std::string on_host = ResumeCrashing(on_cuda1, {"--model-device", "cpu"}, 23);
  ASSERT_OK_AND_ASSIGN(auto host_origins, OriginDevices(on_host));
  EXPECT_EQ(host_origins["model.fc1.weight"], Device::Cpu());
  // And back on a machine with two devices, the model on cuda:1 again.
  std::string final_path =
      Resume(on_host, {"--emulate-devices", "2", "--model-device", "cuda:1"});
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/true);
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(final_path));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(1));
  EXPECT_EQ(origins["optimizer.state.0.exp_avg"], Device::Cuda(1));
  EXPECT_EQ(origins["database.x"], Device::Cpu());
}

TEST_F(RestartTest, BothPlacementOptionsFailBeforeReadingAnything) {
  std::string missing = Path("does-not-exist.rckpt");
  ProcessResult both = Demo({"--resume", missing, "--map-location", "cpu",
                             "--model-device", "cpu"});
  EXPECT_EQ(both.exit_code, 2) << both.Describe();
  EXPECT_THAT(both.err, HasSubstr("InvalidArgument"));
  // The same file with one option is a missing file: the 2 came first.
  ProcessResult one = Demo({"--resume", missing, "--model-device", "cpu"});
  EXPECT_EQ(one.exit_code, 3) << one.Describe();
}

TEST_F(RestartTest, DamagedCheckpointExitsWithFour) {
  std::string ckpt = CrashAfter(8);
  std::filesystem::resize_file(ckpt, std::filesystem::file_size(ckpt) / 2);
  ProcessResult r = Demo({"--resume", ckpt, "--model-device", "cpu"});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("Corruption"));
}

TEST_F(RestartTest, CrashDuringSaveLeavesThePreviousCheckpointUsable) {
  std::string baseline = Baseline();
  std::string ckpt = Path("last.rckpt");
  ProcessResult crash = Demo(Concat({"--steps", std::to_string(kSteps), "--checkpoint",
                                     ckpt, "--checkpoint-every", std::to_string(kEvery),
                                     "--stop-in-save", "3"},
                                    kSmall));
  EXPECT_EQ(crash.signal, SIGABRT) << crash.Describe();
  EXPECT_THAT(crash.err, HasSubstr("--stop-in-save"));
  // The third save (step 12) died half-way, leaving its temporary behind;
  // the second one (step 8) stands.
  bool temporary_left = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    temporary_left |= entry.path().filename().string().starts_with("last.rckpt.tmp");
  }
  EXPECT_TRUE(temporary_left) << "the crash should have happened during the write";
  EXPECT_EQ(StoredStep(ckpt), 2 * kEvery);
  ExpectIdentical(baseline, Resume(ckpt, {}));
}

class EmulatedPlacementTest : public RestartTest,
                              public ::testing::WithParamInterface<PlacementCase> {};

TEST_P(EmulatedPlacementTest, Cuda1RunEndsIdenticalOnOtherDevices) {
  const PlacementCase& c = GetParam();
  std::string baseline = Baseline(kOnEmulatedCuda1);
  std::string ckpt = CrashAfter(18, kOnEmulatedCuda1);
  std::string final_path = Resume(ckpt, Concat({"--emulate-devices", "2"}, c.args));
  ExpectIdentical(baseline, final_path, /*ignore_devices=*/true);

  // The continued run lived where the load put it, and saved from there.
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(final_path));
  const std::string label = c.label;
  Device model = label == "ModelDeviceCpu" ? Device::Cpu()
                 : label == "AsStored"     ? Device::Cuda(1)
                                           : Device::Cuda(0);
  Device data = label == "AsStored" ? Device::Cuda(1)
                : label == "TagMap" ? Device::Cuda(0)
                                    : Device::Cpu();
  EXPECT_EQ(origins["model.fc2.weight"], model);
  EXPECT_EQ(origins["loss.log_var"], model);
  EXPECT_EQ(origins["optimizer.state.3.exp_avg"], model);
  EXPECT_EQ(origins["optimizer.state.3.step"], Device::Cpu());
  EXPECT_EQ(origins["database.y"], data);
  EXPECT_EQ(origins["rng.shuffle"], Device::Cpu());
  if (label == "AsStored") ExpectIdentical(baseline, final_path);
}

INSTANTIATE_TEST_SUITE_P(
    Options, EmulatedPlacementTest,
    ::testing::Values(PlacementCase{"AsStored", {}},
                      PlacementCase{"ModelDeviceCuda0", {"--model-device", "cuda:0"}},
                      PlacementCase{"TagMap", {"--map-location", "cuda:1=cuda:0"}},
                      PlacementCase{"ModelDeviceCpu", {"--model-device", "cpu"}}),
    [](const auto& info) { return std::string(info.param.label); });

// The CLI cases. A build without the CLI (RCKPT_BUILD_TOOLS=OFF) skips them,
// saying so; in a build with it, a command or option the CLI rejects is a
// failure naming the command line and the CLI's answer, never a skip.
class CliTest : public RestartTest {
 protected:
  void SetUp() override {
    if (kCli == nullptr) GTEST_SKIP() << "this build has no rckpt CLI (RCKPT_BUILD_TOOLS=OFF)";
    ASSERT_TRUE(CliBuilt()) << "the rckpt CLI of this build is missing: " << kCli;
    RestartTest::SetUp();
  }

  // Runs `rckpt <args...>`.
  ProcessResult Cli(const std::vector<std::string>& args) {
    return RunProcess(Concat({kCli}, args), dir_);
  }
};

TEST_F(CliTest, DiffAgreesWithTheLibrary) {
  std::string baseline = Baseline();
  std::string resumed = Resume(CrashAfter(18), {});
  ProcessResult same = Cli({"diff", baseline, resumed});
  ASSERT_EQ(same.exit_code, 0) << same.Describe();

  std::string moved = Resume(CrashAfter(18, kOnEmulatedCuda1), {"--model-device", "cpu"});
  std::string cuda_baseline = Baseline(kOnEmulatedCuda1);
  ProcessResult devices = Cli({"diff", cuda_baseline, moved});
  EXPECT_EQ(devices.exit_code, 1) << devices.Describe();
  ProcessResult ignored = Cli({"diff", "--ignore-devices", cuda_baseline, moved});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.Describe();

  std::string other = Baseline({"--seed", "3"});
  ProcessResult differs = Cli({"diff", baseline, other});
  EXPECT_EQ(differs.exit_code, 1) << differs.Describe();
}

TEST_F(CliTest, CheckpointRetaggedToCuda1BehavesLikeOneSavedThere) {
  std::string baseline = Baseline();
  std::string ckpt = CrashAfter(18);
  std::string retagged = Path("retagged.rckpt");
  ProcessResult convert = Cli({"convert", ckpt, retagged, "--set-device", "cpu=cuda:1"});
  ASSERT_EQ(convert.exit_code, 0) << convert.Describe();
  ASSERT_OK_AND_ASSIGN(auto origins, OriginDevices(retagged));
  EXPECT_EQ(origins["model.fc1.weight"], Device::Cuda(1));

  if (RealDeviceCount() < 2) {
    ProcessResult plain = Demo({"--resume", retagged, "--steps", std::to_string(kSteps)});
    EXPECT_EQ(plain.exit_code, 6) << plain.Describe();
  }
  ExpectIdentical(baseline, Resume(retagged, {"--model-device", "cpu"}),
                  /*ignore_devices=*/false);
}

TEST_F(RestartTest, HelpTeachesTheOptions) {
  ProcessResult r = Demo({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--resume", "--model-device", "--map-location",
                             "--stop-after", "--stop-in-save", "--emulate-devices"}) {
    EXPECT_THAT(r.out, HasSubstr(option));
  }
}

TEST_F(RestartTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(Demo({"--no-such-option"}).exit_code, 2);
  EXPECT_EQ(Demo({"--steps", "many"}).exit_code, 2);
  EXPECT_EQ(Demo({"--model-device", "cuda:x", "--resume", Path("x.rckpt")}).exit_code, 2);
  EXPECT_EQ(Demo({"--model-device", "cpu"}).exit_code, 2);  // needs --resume
  EXPECT_EQ(Demo({"--resume", Path("x.rckpt"), "--device", "cpu"}).exit_code, 2);
}

TEST_F(RestartTest, ResumeAcceptsTheFreshRunsSeedAndHidden) {
  // The fresh run's command line with --resume added: the same --seed and
  // --hidden (kSmall) are the checkpoint's own values.
  std::string baseline = Baseline({"--seed", "5"});
  std::string ckpt = CrashAfter(15, {"--seed", "5"});
  ExpectIdentical(baseline, Resume(ckpt, Concat({"--seed", "5"}, kSmall)));
}

TEST_F(RestartTest, ResumeRefusesAConflictingSeedOrHiddenNamingBoth) {
  std::string ckpt = CrashAfter(15, {"--seed", "5"});
  ProcessResult seed = Demo({"--resume", ckpt, "--steps", std::to_string(kSteps),
                             "--seed", "6"});
  EXPECT_EQ(seed.exit_code, 2) << seed.Describe();
  EXPECT_THAT(seed.err, HasSubstr("--seed 6 conflicts with the checkpoint's seed 5"));
  ProcessResult hidden = Demo({"--resume", ckpt, "--steps", std::to_string(kSteps),
                               "--seed", "5", "--hidden", "32"});
  EXPECT_EQ(hidden.exit_code, 2) << hidden.Describe();
  EXPECT_THAT(hidden.err, HasSubstr("--hidden 32 conflicts with the checkpoint's hidden 24"));
}

TEST_F(RestartTest, MissingDeviceForAFreshRunExitsWithSix) {
  ProcessResult r = Demo({"--emulate-devices", "1", "--device", "cuda:1", "--steps", "1"});
  EXPECT_EQ(r.exit_code, 6) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("cuda:1"));
}

}  // namespace
}  // namespace rckpt::testing
