// The fixture of the restart tests: runs rckpt-train-demo as a child
// process in a fresh directory, crashes and resumes it, and compares final
// checkpoints through the library.
#ifndef RCKPT_TESTS_RESTART_RESTART_FIXTURE_H_
#define RCKPT_TESTS_RESTART_RESTART_FIXTURE_H_

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint_compare.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "subprocess.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt::testing {

// Small enough for the whole file to run in seconds: 15 steps per epoch,
// so kSteps spans a few epochs, and a checkpoint every kEvery steps.
inline constexpr int kSteps = 40;
inline constexpr int kEvery = 4;
inline const std::vector<std::string> kSmall = {"--hidden", "24"};

inline std::vector<std::string> Concat(std::vector<std::string> a,
                                       const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The rckpt CLI, when this build has it (RCKPT_BUILD_TOOLS); the tests say so
// where the build leaves it out, and fail where it should be but is not.
// RCKPT_CLI_BINARY / RCKPT_DEMO_BINARY in the environment replace the paths
// of this build (binaries carried to another machine: tests/gpu/proof.sh).
inline const char* BinaryPath(const char* env, const char* built) {
  const char* v = std::getenv(env);
  return v != nullptr && v[0] != '\0' ? v : built;
}
#ifdef RCKPT_CLI_BINARY
inline const char* const kCli = BinaryPath("RCKPT_CLI_BINARY", RCKPT_CLI_BINARY);
#else
inline const char* const kCli = nullptr;
#endif
inline const char* const kDemo = BinaryPath("RCKPT_DEMO_BINARY", RCKPT_DEMO_BINARY);
inline bool CliBuilt() { return kCli != nullptr && std::filesystem::exists(kCli); }

// Whether this machine has real CUDA devices (auto then means cuda:0).
inline int RealDeviceCount() { return DefaultRuntime().DeviceCount().value_or(0); }


class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = NewTempDir("restart"); }
  // A failed test keeps its files (the paths are in the failure messages).
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  ProcessResult Demo(const std::vector<std::string>& args) {
    return RunProcess(Concat({kDemo}, StandinArgs(args)), dir_);
  }

  // An uninterrupted run to kSteps; returns its final checkpoint.
  std::string Baseline(const std::vector<std::string>& extra = {}) {
    std::string final_path = Path("baseline-" + std::to_string(baselines_++) + ".rckpt");
    ProcessResult r = Demo(Concat(Concat({"--steps", std::to_string(kSteps), "--final",
                                          final_path},
                                         kSmall),
                                  extra));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return final_path;
  }

  // A run checkpointing every kEvery steps that crashes after `stop` steps;
  // returns the checkpoint path.
  std::string CrashAfter(int stop, const std::vector<std::string>& extra = {}) {
    std::string ckpt = Path("last-" + std::to_string(stop) + ".rckpt");
    ProcessResult r = Demo(Concat(
        Concat({"--steps", std::to_string(kSteps), "--checkpoint", ckpt,
                "--checkpoint-every", std::to_string(kEvery), "--stop-after",
                std::to_string(stop)},
               kSmall),
        extra));
    EXPECT_EQ(r.signal, SIGABRT) << "the run should have crashed\n" << r.Describe();
    EXPECT_THAT(r.err, ::testing::HasSubstr("--stop-after"));
    return ckpt;
  }

  // Resumes from `ckpt` to kSteps; returns the final path ("" on failure).
  std::string Resume(const std::string& ckpt, const std::vector<std::string>& extra,
                     ProcessResult* result = nullptr) {
    std::string final_path = Path("resumed-" + std::to_string(resumes_++) + ".rckpt");
    ProcessResult r = Demo(Concat({"--resume", ckpt, "--steps", std::to_string(kSteps),
                                   "--checkpoint", Path("resumed-last.rckpt"),
                                   "--checkpoint-every", std::to_string(kEvery),
                                   "--final", final_path},
                                  extra));
    if (result != nullptr) *result = r;
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_THAT(r.out, ::testing::HasSubstr("restored in"));
    return r.exit_code == 0 ? final_path : "";
  }

  // Resumes from `ckpt`, checkpointing to a new path, and crashes after
  // global step `stop`; returns the new checkpoint path.
  std::string ResumeCrashing(const std::string& ckpt, const std::vector<std::string>& extra,
                             int stop) {
    std::string next = Path("chain-" + std::to_string(resumes_++) + ".rckpt");
    ProcessResult r = Demo(Concat({"--resume", ckpt, "--steps", std::to_string(kSteps),
                                   "--checkpoint", next, "--checkpoint-every",
                                   std::to_string(kEvery), "--stop-after",
                                   std::to_string(stop)},
                                  extra));
    EXPECT_EQ(r.signal, SIGABRT) << "the run should have crashed\n" << r.Describe();
    return next;
  }

  void ExpectIdentical(const std::string& a, const std::string& b,
                       bool ignore_devices = false) {
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    ASSERT_OK_AND_ASSIGN(std::vector<std::string> diffs,
                         CompareCheckpoints(a, b, ignore_devices));
    EXPECT_THAT(diffs, ::testing::IsEmpty()) << a << " vs " << b;
    // The same through `rckpt diff`, where the build has the CLI.
    if (kCli == nullptr) {
      std::cout << "[ note     ] this build has no rckpt CLI: " << a << " and " << b
                << " compared through the library only\n";
      return;
    }
    ASSERT_TRUE(CliBuilt()) << "the rckpt CLI of this build is missing: " << kCli;
    std::vector<std::string> args = {kCli, "diff"};
    if (ignore_devices) args.push_back("--ignore-devices");
    ProcessResult r = RunProcess(Concat(args, {a, b}), dir_);
    EXPECT_EQ(r.exit_code, 0) << "rckpt diff: " << r.Describe();
  }

  int64_t StoredStep(const std::string& path) {
    LoadOptions options;
    options.map_location = MapLocation::To(Device::Cpu());
    Result<Checkpoint> ck = Load(path, options);
    EXPECT_TRUE(ck.ok()) << ck.status().ToString();
    if (!ck.ok()) return -1;
    const Value* c = ck->Tree().Find(std::string_view("controller"));
    const Value* step = c ? c->Find(std::string_view("global_step")) : nullptr;
    return step ? step->as_int() : -1;
  }

  std::string dir_;
  int baselines_ = 0;
  int resumes_ = 0;
};

}  // namespace rckpt::testing

#endif  // RCKPT_TESTS_RESTART_RESTART_FIXTURE_H_
