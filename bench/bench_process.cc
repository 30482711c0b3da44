#include "bench_process.h"

#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "bench_data.h"
#include "bench_limits.h"
#include "rckpt/io.h"

extern char** environ;

namespace rckpt::bench {
namespace {

// Seconds from spawn to exit of `argv`, stdout and stderr to `out`; nullopt
// when it could not start or exited with a non-zero status.
std::optional<double> SpawnTimed(const std::vector<std::string>& argv, const std::string& out) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const double t0 = Now();
  const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return std::nullopt;
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double t = Now() - t0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return t;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The number after "key": in a JSON text; 0 when absent.
double NumberField(const std::string& text, const std::string& key) {
  const size_t p = text.find("\"" + key + "\":");
  return p == std::string::npos ? 0 : std::atof(text.c_str() + p + key.size() + 3);
}

std::string StringField(const std::string& text, const std::string& key) {
  const std::string k = "\"" + key + "\": \"";
  const size_t p = text.find(k);
  if (p == std::string::npos) return "";
  const size_t e = text.find('"', p + k.size());
  return text.substr(p + k.size(), e - p - k.size());
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string SizeName(uint64_t bytes) {
  return bytes >= (1ull << 30) && bytes % (1ull << 30) == 0
             ? std::to_string(bytes >> 30) + "G"
             : std::to_string(bytes >> 20) + "M";
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

// One measured program: its argv, the file it reads, and what it gave.
struct Runner {
  std::string name;
  std::vector<std::string> argv;
  std::string file;
  bool peer = false;            // seconds come from the script's own report
  std::vector<double> seconds;  // per rep
  std::vector<double> inner;    // rckpt: the load's own seconds
  double bytes = 0;
  std::string skipped;
};

void RunOnce(Runner& r, const std::string& out, bool cold, bool keep) {
  if (!r.skipped.empty()) return;
  if (cold) DropFromCache(r.file);
  const std::optional<double> wall = SpawnTimed(r.argv, out);
  const std::string text = Slurp(out);
  if (!wall) {
    r.skipped = "exited with an error: " + text.substr(0, 300);
    return;
  }
  if (r.peer) {
    const std::string why = StringField(text, "skipped");
    if (!why.empty()) {
      r.skipped = why;
      return;
    }
    if (keep) r.seconds.push_back(NumberField(text, "seconds"));
    r.bytes = NumberField(text, "bytes");
  } else if (keep) {
    r.seconds.push_back(*wall);
    r.inner.push_back(NumberField(text, "seconds"));
  }
}

// Median wall time of `argv` (process start and exit, nothing loaded).
double StartSeconds(const std::vector<std::string>& argv, const std::string& out, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    const std::optional<double> s = SpawnTimed(argv, out);
    if (!s) return 0;
    if (i > 0) t.push_back(*s);
  }
  return MedianOf(t);
}

void AddRows(const ProcessOptions& o, uint64_t bytes, const std::string& label,
             std::vector<Runner>& runners, Report* report) {
  std::map<std::string, Runner*> by;
  for (Runner& r : runners) by[r.name] = &r;
  const Runner& zstd = *by["zstd1+shuffle"];
  const double zstd_gbps = zstd.skipped.empty() ? bytes / MedianOf(zstd.seconds) / 1e9 : 0;
  auto row = [&](const std::string& codec) {
    const Runner& r = *by[codec];
    CaseResult c{.name = "process/load/" + codec + " " + label, .bytes = bytes,
                 .seconds = r.skipped.empty() ? MedianOf(r.seconds) : 0};
    if (!r.skipped.empty()) {
      report->skipped.push_back({c.name, r.skipped});
      return c;
    }
    c.note = "the load itself " + Ms(MedianOf(r.inner)) + " of the process's " +
             Ms(c.seconds);
    return c;
  };
  struct Link {
    std::string peer, label;
    double target;
  };
  const std::vector<Link> links = {{"torch.load", "", 2.0},
                                   {"torch.load(mmap=True)+touch", " vs mmap", 2.0},
                                   {"safetensors.load_file+touch", " vs safetensors", 1.0}};
  for (const std::string codec : {"none", "none (copy)"}) {
    CaseResult base = row(codec);
    if (base.seconds <= 0) continue;
    base.limit = "process/load/zstd1+shuffle";
    base.limit_gbps = zstd_gbps;
    // The targets are the default's; the copying opt-out is shown beside it.
    if (codec == "none") base.target_ratio = 1.0;
    if (!o.peers) {
      report->results.push_back(base);
      continue;
    }
    for (const Link& l : links) {
      CaseResult c = base;
      c.name += l.label;
      c.peer = l.peer;
      if (codec == "none") c.target_speedup = l.target;
      if (!l.label.empty()) c.target_ratio.reset();
      const Runner& p = *by[l.peer];
      if (!p.skipped.empty()) {
        c.peer_skipped = p.skipped;
        if (codec == "none") report->skipped.push_back({"peer " + l.peer + " " + label, p.skipped});
      } else if (!p.seconds.empty()) {
        c.peer_gbps = p.bytes / MedianOf(p.seconds) / 1e9;
      }
      report->results.push_back(c);
    }
  }
  CaseResult z = row("zstd1+shuffle");
  if (z.seconds > 0) report->results.push_back(z);
}

}  // namespace

void ProcessCases(const ProcessOptions& o, Report* report) {
  if (o.cli.empty() || !std::filesystem::exists(o.cli)) {
    report->skipped.push_back({"whole-process cases", "the rckpt CLI is not built (RCKPT_BUILD_TOOLS)"});
    return;
  }
  const std::string out = o.dir + "/process.out";
  const std::string script = o.peers_dir + "/process_peer.py";
  const double start = StartSeconds({o.cli, "--version"}, out, o.reps);
  report->info["process start: rckpt --version, spawn to exit"] = Ms(start);
  if (o.peers) {
    report->info["process start: python + import torch (excluded from peers)"] =
        Ms(StartSeconds({o.python, "-c", "import torch"}, out, o.reps));
    report->info["process start: python + import safetensors.torch (excluded from peers)"] =
        Ms(StartSeconds({o.python, "-c", "import safetensors.torch"}, out, o.reps));
  }
  const std::string threads = std::to_string(o.threads);
  for (const uint64_t size : o.sizes) {
    const std::string none = o.dir + "/process-none.rckpt";
    const std::string zstd = o.dir + "/process-zstd.rckpt";
    const std::string st = o.dir + "/process.safetensors";
    const std::string pt = o.dir + "/process.pt";
    uint64_t bytes = 0;
    {
      Result<BenchData> data = Generate(size, 0, 3, std::max(1, o.threads));
      if (!data.ok()) {
        report->skipped.push_back({"whole-process " + SizeName(size), data.status().ToString()});
        continue;
      }
      bytes = data->bytes;
      Result<Checkpoint> ck = data->ToCheckpoint();
      Status s = ck.status();
      if (s.ok()) s = Save(none, *ck, SaveOptions{.codec = Codec::kNone});
      if (s.ok()) s = Save(zstd, *ck, SaveOptions{.codec = Codec::kZstd, .level = 1, .shuffle = Shuffle::kOn});
      if (s.ok() && o.peers) s = WriteSafetensors(*data, st);
      if (!s.ok()) {
        report->skipped.push_back({"whole-process " + SizeName(size), s.ToString()});
        continue;
      }
    }
    ::malloc_trim(0);
    if (o.log) o.log("whole-process cases, " + SizeName(size));
    std::vector<Runner> runners = {
        {.name = "none", .argv = {o.cli, "load", none, "--json", "--threads", threads}, .file = none},
        {.name = "none (copy)",
         .argv = {o.cli, "load", none, "--json", "--no-map-file", "--threads", threads},
         .file = none},
        {.name = "zstd1+shuffle", .argv = {o.cli, "load", zstd, "--json", "--threads", threads},
         .file = zstd}};
    if (o.peers) {
      std::optional<double> wrote =
          SpawnTimed({o.python, script, "--write-pt", pt, "--safetensors", st}, out);
      for (const std::string peer : {"torch.load", "torch.load(mmap=True)+touch",
                                     "safetensors.load_file+touch"}) {
        const bool safetensors = peer.rfind("safetensors", 0) == 0;
        Runner r{.name = peer,
                 .argv = {o.python, script, "--case", peer, "--file", safetensors ? st : pt,
                          "--threads", threads},
                 .file = safetensors ? st : pt,
                 .peer = true};
        if (!safetensors && !wrote) r.skipped = "torch.save of the peer file failed: " + Slurp(out);
        runners.push_back(r);
      }
    }
    for (const bool cold : {false, true}) {
      const std::string label = SizeName(size) + (cold ? " cold" : " warm");
      if (cold) {
        const double resident = DropFromCache(none);
        if (resident < 0 || resident >= 0.05) {
          report->skipped.push_back({"whole-process " + label,
                                     resident < 0 ? "mincore could not check residency"
                                                  : "posix_fadvise(DONTNEED) left the file cached"});
          continue;
        }
      }
      std::vector<Runner> rs = runners;
      // Interleaved: every rep runs each program once, in turn.
      for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
        for (Runner& r : rs) RunOnce(r, out, cold, rep >= o.warmup);
      }
      AddRows(o, bytes, label, rs, report);
    }
    for (const std::string& f : {none, zstd, st, pt, out}) std::filesystem::remove(f);
  }
}

void SmallTensorCases(const std::string& dir, int count, int reps, double us_per_tensor,
                      Report* report) {
  Checkpoint ck;
  for (int i = 0; i < count; ++i) {
    Result<Tensor> t = Tensor::Zeros(DType::kF32, {16});
    if (!t.ok()) return;
    std::string name(1, 't');
    name += std::to_string(i);
    Status s = ck.AddTensor(i % 2 ? "model" : "optimizer", name, *t);
    if (!s.ok()) return;
  }
  const std::string path = dir + "/small.rckpt";
  const uint64_t bytes = ck.TensorBytes();
  const std::vector<double> m = Interleaved(1, reps, {[&] {
    const double t0 = Now();
    if (!Save(path, ck).ok()) return 0.0;
    return Now() - t0;
  }, [&] {
    const double t0 = Now();
    Result<Checkpoint> back = Load(path, LoadOptions{});
    const double t = Now() - t0;
    return back.ok() ? t : 0.0;
  }});
  std::filesystem::remove(path);
  const std::string n = std::to_string(count / 1000) + "k";
  const double limit_gbps = bytes / (us_per_tensor * 1e-6 * count) / 1e9;
  for (size_t k = 0; k < 2; ++k) {
    CaseResult c{.name = (k == 0 ? "small/save " : "small/load ") + n + " tensors of 64 B",
                 .bytes = bytes, .seconds = m[k],
                 .limit = std::to_string(static_cast<int>(us_per_tensor)) + " us per tensor",
                 .limit_gbps = limit_gbps, .target_ratio = 1.0};
    char note[64];
    std::snprintf(note, sizeof note, "%.2f us per tensor", m[k] / count * 1e6);
    c.note = note;
    report->results.push_back(c);
  }
}

}  // namespace rckpt::bench
