// What this process has of its node: the CPUs it may run on (its affinity
// mask), its cgroup's CPU quota, and what the launcher (torchrun, Open MPI,
// MPICH, SLURM) says of its place among the node's processes. One place for
// every layer that sizes its threads or picks the process's GPU: the load
// and save pipelines, the object-storage transport, the CUDA runtime.
//
// Everything is read through NodeSources, so tests give fake affinity masks,
// cgroup trees and environments instead of the machine's.
//
// Thread-safety: every function may be called from any thread.
#ifndef RCKPT_SRC_UTIL_NODE_H_
#define RCKPT_SRC_UTIL_NODE_H_

#include <functional>
#include <optional>
#include <string>

namespace rckpt {

// Where the facts come from. The defaults read the machine.
struct NodeSources {
  // The number of CPUs in the process's affinity mask (sched_getaffinity);
  // 0 when unknown.
  std::function<int()> affinity_cpus;
  // The number of CPUs online (sysconf); 0 when unknown.
  std::function<int()> online_cpus;
  // The cgroup filesystem's mount point and the process's cgroup list, as
  // /proc/self/cgroup gives it.
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_self_cgroup = "/proc/self/cgroup";
  // An environment variable's value, or nullopt when unset.
  std::function<std::optional<std::string>(const char*)> env;
};

struct NodeFacts {
  int affinity_cpus = 0;    // 0: unknown
  int online_cpus = 0;      // 0: unknown
  double cgroup_cpus = 0;   // the CPU quota in CPUs (quota / period); 0: none
  int local_world_size = 0; // processes of this job on this node; 0: unknown
  int local_rank = -1;      // this process's place among them; -1: unknown
};

// Reads the facts. The cgroup quota is the smallest of the process's cgroup
// and its ancestors': cgroup v2's cpu.max ("max 100000" is none), else v1's
// cpu.cfs_quota_us over cpu.cfs_period_us (-1 is none). The local world size
// is LOCAL_WORLD_SIZE (torchrun), else OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI),
// else MPI_LOCALNRANKS (MPICH), else SLURM_NTASKS_PER_NODE; the local rank
// LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID.
// A value that is not a decimal counts as unset.
NodeFacts ReadNodeFacts(const NodeSources& sources = {});

// The worker threads a process should run for a load or save: the CPUs it
// may use (its affinity mask, bounded by its cgroup's quota rounded up),
// shared among the job's processes on this node when they all see the same
// CPUs (an affinity mask narrower than the node already is this process's
// share). At least 1.
int NodeThreads(const NodeFacts& facts);

// NodeThreads(ReadNodeFacts()), read once per process.
int DefaultThreads();
// The same with the job's processes on this node counted by the caller (a
// communicator knows them), whatever the launcher's variables say.
int DefaultThreadsAmong(int processes_on_node);

// The device a process uses when nothing else says (the CUDA runtime's
// CurrentDevice on a thread without a current context): the local rank when
// it names one of `device_count` visible devices, else 0 (the first visible
// device; a launcher that gives each process one GPU through
// CUDA_VISIBLE_DEVICES leaves it only cuda:0).
int DefaultDeviceIndex(const NodeFacts& facts, int device_count);

}  // namespace rckpt

#endif  // RCKPT_SRC_UTIL_NODE_H_
