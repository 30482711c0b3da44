// The node facts (util/node.h) read from fake affinity masks, cgroup trees
// and environments, and the thread counts and devices they give.
#include "util/node.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "test_util.h"

namespace rckpt {
namespace {

namespace fs = std::filesystem;

// A fake machine: its CPUs, a cgroup tree under a temporary folder, and an
// environment.
class FakeNode {
 public:
  explicit FakeNode(int affinity, int online = 112) {
    std::string name = "rckpt-node-test-";
    name.append(std::to_string(::getpid())).append("-").append(std::to_string(counter_++));
    root_ = fs::temp_directory_path() / name;
    fs::remove_all(root_);
    fs::create_directories(root_ / "cgroup");
    sources_.affinity_cpus = [affinity] { return affinity; };
    sources_.online_cpus = [online] { return online; };
    sources_.cgroup_root = (root_ / "cgroup").string();
    sources_.proc_self_cgroup = (root_ / "proc-self-cgroup").string();
    sources_.env = [this](const char* name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
    Write("proc-self-cgroup", "0::/\n");
  }
  ~FakeNode() { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void Env(const std::string& name, const std::string& value) { env_[name] = value; }
  NodeFacts Facts() const { return ReadNodeFacts(sources_); }
  int Threads() const { return NodeThreads(Facts()); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
  NodeSources sources_;
  std::map<std::string, std::string> env_;
};

TEST(NodeTest, AProcessAloneOnTheNodeUsesEveryCpuItMayRunOn) {
  FakeNode node(112);
  EXPECT_EQ(node.Threads(), 112);
  FakeNode pinned(6);
  EXPECT_EQ(pinned.Threads(), 6) << "the affinity mask, not the machine's cores";
}

TEST(NodeTest, EightRanksOnTheWholeNodeShareItsCpus) {
  FakeNode node(112);
  node.Env("LOCAL_WORLD_SIZE", "8");
  EXPECT_EQ(node.Facts().local_world_size, 8);
  EXPECT_EQ(node.Threads(), 14);
}

TEST(NodeTest, ARankBoundToItsCoresIsNotDividedAgain) {
  FakeNode node(14);  // a launcher that gives each rank its own 14 cores
  node.Env("LOCAL_WORLD_SIZE", "8");
  EXPECT_EQ(node.Threads(), 14);
}

TEST(NodeTest, OtherLaunchersSayTheLocalWorldSizeToo) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    FakeNode node(64, 64);
    node.Env(name, "4");
    EXPECT_EQ(node.Threads(), 16) << name;
  }
  FakeNode garbage(64, 64);
  garbage.Env("LOCAL_WORLD_SIZE", "eight");
  EXPECT_EQ(garbage.Threads(), 64) << "a value that is not a number is unset";
}

TEST(NodeTest, ACgroupV2QuotaBoundsTheThreads) {
  FakeNode node(112);
  node.Write("proc-self-cgroup", "0::/job/rank3\n");
  node.Write("cgroup/job/cpu.max", "1600000 100000\n");       // 16 CPUs for the job
  node.Write("cgroup/job/rank3/cpu.max", "max 100000\n");     // none of its own
  EXPECT_DOUBLE_EQ(node.Facts().cgroup_cpus, 16);
  EXPECT_EQ(node.Threads(), 16);
  node.Env("LOCAL_WORLD_SIZE", "8");
  EXPECT_EQ(node.Threads(), 2);
}

TEST(NodeTest, AFractionalQuotaRoundsUp) {
  FakeNode node(8, 8);
  node.Write("cgroup/cpu.max", "250000 100000\n");
  EXPECT_EQ(node.Threads(), 3);
}

TEST(NodeTest, NoQuotaIsNoBound) {
  FakeNode node(32, 32);
  node.Write("cgroup/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(node.Facts().cgroup_cpus, 0);
  EXPECT_EQ(node.Threads(), 32);
}

TEST(NodeTest, ACgroupV1QuotaBoundsTheThreads) {
  FakeNode node(48, 48);
  node.Write("proc-self-cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n");
  node.Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
  node.Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(node.Facts().cgroup_cpus, 4);
  EXPECT_EQ(node.Threads(), 4);
}

TEST(NodeTest, ACgroupV1PathTheMountDoesNotShowFallsBackToItsRoot) {
  // Inside a container the mount's root is the container's own cgroup.
  FakeNode node(48, 48);
  node.Write("proc-self-cgroup", "4:cpu,cpuacct:/kubepods/pod1/c1\n");
  node.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
  node.Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(node.Threads(), 2);
  FakeNode unlimited(48, 48);
  unlimited.Write("proc-self-cgroup", "4:cpu,cpuacct:/\n");
  unlimited.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  unlimited.Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(unlimited.Threads(), 48);
}

TEST(NodeTest, AtLeastOneThread) {
  FakeNode node(2, 2);
  node.Env("LOCAL_WORLD_SIZE", "8");
  EXPECT_EQ(node.Threads(), 1);
  FakeNode unknown(0, 0);
  EXPECT_EQ(unknown.Threads(), 1);
}

TEST(NodeTest, TheDefaultDeviceIsTheLocalRanksWhenItIsVisible) {
  FakeNode node(8);
  EXPECT_EQ(DefaultDeviceIndex(node.Facts(), 8), 0) << "no launcher: the first visible device";
  node.Env("LOCAL_RANK", "5");
  EXPECT_EQ(node.Facts().local_rank, 5);
  EXPECT_EQ(DefaultDeviceIndex(node.Facts(), 8), 5);
  EXPECT_EQ(DefaultDeviceIndex(node.Facts(), 1), 0)
      << "one GPU per process through CUDA_VISIBLE_DEVICES: it is cuda:0";
  FakeNode mpi(8);
  mpi.Env("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  EXPECT_EQ(DefaultDeviceIndex(mpi.Facts(), 4), 2);
}

}  // namespace
}  // namespace rckpt
