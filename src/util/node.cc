#include "util/node.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace rckpt {
namespace {

std::optional<std::string> ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<long long> ParseInt(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The cgroup paths /proc/self/cgroup lists: v2's "0::/a/b" as {"", "/a/b"},
// v1's "4:cpu,cpuacct:/a" as {"cpu,cpuacct", "/a"}.
std::vector<std::pair<std::string, std::string>> CgroupPaths(const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    out.emplace_back(line.substr(a + 1, b - a - 1), line.substr(b + 1));
  }
  return out;
}

// `dir` and each ancestor up to `root`, deepest first. A path the mount
// does not show (a v1 cgroup seen from inside a container) still leaves
// `root` itself, which is the container's own cgroup there.
std::vector<std::string> SelfAndAncestors(const std::string& root, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(root + path);
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  dirs.push_back(root);
  return dirs;
}

// The quota in CPUs of one cgroup directory; 0 when it sets none.
double V2Quota(const std::string& dir) {
  std::optional<std::string> line = ReadFirstLine(dir + "/cpu.max");
  if (!line) return 0;
  std::istringstream words(*line);
  std::string quota, period;
  words >> quota >> period;
  std::optional<long long> q = ParseInt(quota);
  std::optional<long long> p = ParseInt(period);
  if (!q || !p || *q <= 0 || *p <= 0) return 0;  // "max": none
  return static_cast<double>(*q) / static_cast<double>(*p);
}

double V1Quota(const std::string& dir) {
  std::optional<std::string> quota = ReadFirstLine(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> period = ReadFirstLine(dir + "/cpu.cfs_period_us");
  if (!quota || !period) return 0;
  std::optional<long long> q = ParseInt(*quota);
  std::optional<long long> p = ParseInt(*period);
  if (!q || !p || *q <= 0 || *p <= 0) return 0;  // -1: none
  return static_cast<double>(*q) / static_cast<double>(*p);
}

// The smallest quota along the process's cgroups (a parent's bounds its
// children), 0 when none sets one.
double CgroupCpus(const NodeSources& s) {
  double best = 0;
  auto take = [&best](double q) {
    if (q > 0 && (best == 0 || q < best)) best = q;
  };
  for (const auto& [controllers, path] : CgroupPaths(s.proc_self_cgroup)) {
    if (controllers.empty()) {  // v2: one unified tree
      for (const std::string& dir : SelfAndAncestors(s.cgroup_root, path)) take(V2Quota(dir));
      continue;
    }
    const std::string list = "," + controllers + ",";
    if (list.find(",cpu,") == std::string::npos) continue;
    // v1 mounts the cpu controller as cpu,cpuacct (with cpu and cpuacct as
    // links to it) or alone as cpu.
    for (const std::string& mount : {controllers, std::string("cpu,cpuacct"), std::string("cpu")}) {
      for (const std::string& dir : SelfAndAncestors(s.cgroup_root + "/" + mount, path)) {
        take(V1Quota(dir));
      }
    }
  }
  return best;
}

int EnvInt(const NodeSources& s, std::initializer_list<const char*> names, int unset) {
  for (const char* name : names) {
    std::optional<std::string> v = s.env(name);
    if (!v) continue;
    std::optional<long long> n = ParseInt(*v);
    if (n && *n >= 0 && *n <= 1 << 20) return static_cast<int>(*n);
  }
  return unset;
}

NodeSources WithDefaults(NodeSources s) {
  if (!s.affinity_cpus) {
    s.affinity_cpus = [] {
      cpu_set_t set;
      CPU_ZERO(&set);
      return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    };
  }
  if (!s.online_cpus) {
    s.online_cpus = [] {
      const long n = sysconf(_SC_NPROCESSORS_ONLN);
      return n > 0 ? static_cast<int>(n) : 0;
    };
  }
  if (!s.env) {
    s.env = [](const char* name) -> std::optional<std::string> {
      const char* v = std::getenv(name);
      if (v == nullptr) return std::nullopt;
      return std::string(v);
    };
  }
  return s;
}

}  // namespace

NodeFacts ReadNodeFacts(const NodeSources& given) {
  const NodeSources s = WithDefaults(given);
  NodeFacts f;
  f.affinity_cpus = std::max(0, s.affinity_cpus());
  f.online_cpus = std::max(0, s.online_cpus());
  f.cgroup_cpus = CgroupCpus(s);
  f.local_world_size = EnvInt(s, {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                  "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}, 0);
  f.local_rank = EnvInt(s, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                            "SLURM_LOCALID"}, -1);
  return f;
}

int NodeThreads(const NodeFacts& f) {
  int cpus = f.affinity_cpus > 0 ? f.affinity_cpus : f.online_cpus;
  if (cpus <= 0) cpus = 1;
  if (f.cgroup_cpus > 0) cpus = std::min(cpus, static_cast<int>(std::ceil(f.cgroup_cpus)));
  // A mask narrower than the node is this process's share already (a
  // launcher that binds each rank to its cores); a full one is shared by
  // every process of the job on this node.
  const bool whole_node = f.online_cpus <= 0 || f.affinity_cpus <= 0 ||
                          f.affinity_cpus >= f.online_cpus;
  if (whole_node && f.local_world_size > 1) cpus /= f.local_world_size;
  return std::max(cpus, 1);
}

namespace {

const NodeFacts& ProcessFacts() {
  static const NodeFacts facts = ReadNodeFacts();
  return facts;
}

}  // namespace

int DefaultThreads() { return NodeThreads(ProcessFacts()); }

int DefaultThreadsAmong(int processes_on_node) {
  NodeFacts f = ProcessFacts();
  f.local_world_size = processes_on_node;
  return NodeThreads(f);
}

int DefaultDeviceIndex(const NodeFacts& f, int device_count) {
  return f.local_rank >= 0 && f.local_rank < device_count ? f.local_rank : 0;
}

}  // namespace rckpt
