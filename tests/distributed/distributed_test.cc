// Collective saves and resharded loads, driven through mpirun with 1 to 4
// ranks (rckpt-mpi-driver does the MPI side and checks every rank's blocks
// bit for bit); this side checks what single-process tools see.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "distributed/mpi_state.h"
#include "format/format_test_util.h"
#include "rckpt/diff.h"
#include "rckpt/io.h"
#include "render.h"
#include "restart/subprocess.h"
#include "test_runtime.h"

namespace rckpt {
namespace {

using testing::ProcessResult;

ProcessResult Mpi(int ranks, std::vector<std::string> args, const std::string& dir) {
  StandinEnvironment(ranks);  // the stand-in suite: each rank's GPUs through the CUDA runtime
  std::vector<std::string> argv = {RCKPT_MPIEXEC, "--oversubscribe", "-np", std::to_string(ranks)};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  // One machine, no network: shared memory between the ranks.
  for (const char* a : {"--mca", "btl", "self,vader"}) argv.push_back(a);
  argv.push_back(RCKPT_MPI_DRIVER);
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunProcess(argv, dir);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Checkpoint LoadWhole(const std::string& path) {
  LoadOptions o;
  o.map_location = MapLocation::To(Device::Cpu());
  Result<Checkpoint> ck = Load(path, o);
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  return ck.ok() ? std::move(ck).value() : Checkpoint();
}

// Equal as `rckpt diff --ignore-devices` says (origins differ on purpose:
// the collective save records cuda:r per shard).
void ExpectSameState(const std::string& a, const std::string& b) {
  DiffOptions o;
  o.ignore_devices = true;
  ASSERT_OK_AND_ASSIGN(DiffReport report, DiffCheckpoints(LoadWhole(a), LoadWhole(b), o));
  EXPECT_EQ(report.count, 0u) << cli::RenderDiffText(report, a, b);
}

class DistributedTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::NewTempDir("mpi"); }

  void SaveStep(int step, const std::string& codec = "none") {
    ProcessResult r = Mpi(4, {"save", dir_, std::to_string(step), codec}, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  std::string File() const { return dir_ + "/ck.rckpt"; }
  // Names of the temporaries (and spill files) in the directory.
  std::vector<std::string> Temporaries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp-") != std::string::npos) out.push_back(name);
    }
    return out;
  }
  std::string Assembled(int step) const {
    return dir_ + "/assembled-" + std::to_string(step) + ".rckpt";
  }

  std::string dir_;
};

TEST_F(DistributedTest, SaveOn4RanksLoadsResharded1To4BitForBit) {
  SaveStep(3, "zstd");
  for (int ranks : {1, 2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    ProcessResult r = Mpi(ranks, {"load", dir_, "3"}, dir_);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.out.find("rank " + std::to_string(ranks - 1) + " of " + std::to_string(ranks)),
              std::string::npos)
        << r.out;
  }
}

TEST_F(DistributedTest, SingleProcessToolsSeeTheAssembledState) {
  SaveStep(2);
  ExpectSameState(File(), Assembled(2));
  ASSERT_OK(VerifyRckpt(File()));
  ASSERT_OK_AND_ASSIGN(InspectReport inspect, InspectRckpt(File()));
  EXPECT_EQ(inspect.format_version, "1.1");
  for (const InspectTensor& t : inspect.tensors) {
    if (t.name == "fc2.weight") {
      ASSERT_EQ(t.shards.size(), 4u);
      EXPECT_EQ(t.shards[3].rank, 3);
      EXPECT_EQ(t.shards[3].device, Device::Cuda(3));
      EXPECT_EQ(t.shards[3].offsets, (Shape{0, 53}));
    }
    if (t.name == "embed.weight") {
      EXPECT_TRUE(t.shards.empty()) << "replicated: written once";
    }
  }
}

TEST_F(DistributedTest, KilledRankMidSaveLeavesThePreviousCheckpoint) {
  SaveStep(1);
  const auto before = FileBytes(File());
  // Rank 1 encodes 10 chunks of 4 KiB, one progress call each. Codec none
  // streams each chunk into the file as it is encoded: killed after the
  // first, mid-way and after the last is in the file. zstd encodes into a
  // spill file, then copies it into the file (an 11th call): killed while
  // spilling and once its bytes are in the file.
  const std::vector<std::pair<std::string, int>> kills = {
      {"none", 1}, {"none", 6}, {"none", 10}, {"zstd", 6}, {"zstd", 11}};
  for (const auto& [codec, call] : kills) {
    SCOPED_TRACE(codec + ", killed at call " + std::to_string(call));
    ProcessResult r = Mpi(4, {"kill", dir_, "2", std::to_string(call), codec}, dir_);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(FileBytes(File()), before);
    ExpectSameState(File(), Assembled(1));
  }
  // The next save removes what the killed jobs left (their temporaries and
  // spill files, named as temporaries of the path) once their processes are
  // gone: mpirun may return while the other ranks are still being torn down.
  std::vector<std::string> left = Temporaries();
  EXPECT_FALSE(left.empty()) << "the killed jobs left nothing to clean up";
  for (const std::string& name : left) {
    const std::string after = name.substr(name.find(".tmp-") + 5);
    const pid_t pid = static_cast<pid_t>(std::stol(after.substr(0, after.find('-'))));
    for (int i = 0; i < 1000 && ::kill(pid, 0) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  SaveStep(2, "zstd");
  EXPECT_THAT(Temporaries(), ::testing::IsEmpty());
}

TEST_F(DistributedTest, CompressedSaveLeavesNoSpillFiles) {
  SaveStep(4, "zstd");
  ExpectSameState(File(), Assembled(4));
  EXPECT_THAT(Temporaries(), ::testing::IsEmpty());
}

TEST_F(DistributedTest, FileSizeLimitOnOneRankIsIoErrorOnEveryRank) {
  SaveStep(1);
  const auto before = FileBytes(File());
  ProcessResult r = Mpi(4, {"fsize", dir_, "2"}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(FileBytes(File()), before);
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(DistributedTest, OverlappingBlocksAreInvalidArgumentOnEveryRank) {
  ProcessResult r = Mpi(4, {"overlap", dir_}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/overlap.rckpt"));
}

TEST_F(DistributedTest, HostileShardMetadataIsCorruptionOnEveryRankAndForVerify) {
  SaveStep(1);
  ProcessResult r = Mpi(3, {"hostile", dir_}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(VerifyRckpt(dir_ + "/hostile.rckpt"),
              StatusIs(StatusCode::kCorruption, "fc1.weight': shards 1 and 2 overlap"));
}

// The restart story across world sizes: a data-parallel run with sharded
// optimizer state trains on 4 ranks and checkpoints; a 2-rank job resumes
// from it, is killed after step 8 (it checkpointed at every step), and
// resumes again on 2 ranks; it ends with exactly the model of a 2-rank job
// that resumed from the same 4-rank checkpoint and never stopped. (Against a
// 4-rank continuation no bit-identity is promised: the order in which the
// gradient is summed depends on the world size.)
TEST_F(DistributedTest, RunResumedOn2RanksAfterA4RankSaveAndAKillEndsAsAnUninterruptedOne) {
  ASSERT_EQ(Mpi(4, {"train", dir_, "0", "5"}, dir_).exit_code, 0);
  const std::string four = dir_ + "/after-4-ranks.rckpt";
  std::filesystem::copy_file(File(), four);
  ProcessResult killed = Mpi(2, {"train", dir_, "5", "12", "8"}, dir_);
  ASSERT_NE(killed.exit_code, 0) << killed.Describe();
  // The kill came after step 8's save; step 9's never completed.
  EXPECT_EQ(LoadWhole(File()).Tree().Find("common")->Find("step")->as_int(), 8);
  ProcessResult resumed = Mpi(2, {"train", dir_, "8", "12"}, dir_);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.Describe();
  std::filesystem::rename(dir_ + "/final-w.rckpt", dir_ + "/interrupted.rckpt");
  std::filesystem::copy_file(four, File(), std::filesystem::copy_options::overwrite_existing);
  ProcessResult straight = Mpi(2, {"train", dir_, "5", "12"}, dir_);
  ASSERT_EQ(straight.exit_code, 0) << straight.Describe();
  ExpectSameState(dir_ + "/interrupted.rckpt", dir_ + "/final-w.rckpt");
}

}  // namespace
}  // namespace rckpt
