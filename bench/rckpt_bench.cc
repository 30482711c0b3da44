// rckpt-bench: throughput of rckpt's save and load paths against the
// machine's limits and against peer loaders, all measured in one run on the
// same generated data. See docs/PERFORMANCE.md for the method.
#include <malloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "bench_limits.h"
#include "bench_peers.h"
#include "bench_process.h"
#include "bench_report.h"
#include "rckpt/io.h"
#include "rckpt/runtime.h"
#include "util/thread_pool.h"

namespace rckpt::bench {
namespace {

struct Flags {
  uint64_t size = 256ull << 20;
  int layers = 0;
  int reps = 5;
  int warmup = 1;
  int threads = 0;
  bool json = false;
  bool peers = true;
  bool sweep = false;
  bool sweep_only = false;
  bool smoke = false;
  bool process = false;       // whole-process cases (bench_process.h)
  bool process_only = false;
  std::vector<uint64_t> process_sizes = {55ull << 20, 192ull << 20, 1ull << 30};
  int small = 100000;         // tensors in the per-tensor cost case (0: none)
  std::string cli = RCKPT_BENCH_CLI;
  std::string csv;
  std::string dir;
  std::string python = "python3";
  std::string peers_dir = RCKPT_BENCH_PEERS_DIR;
};

constexpr char kUsage[] =
    "usage: rckpt-bench [--quick | --smoke | --size BYTES[K|M|G]] [--layers N] [--reps N]\n"
    "                   [--threads N] [--json] [--csv FILE] [--sweep | --sweep-only]\n"
    "                   [--no-peers] [--dir DIR] [--python EXE] [--peers-dir DIR]\n"
    "                   [--process | --process-only] [--process-sizes S1,S2,...] [--cli EXE]\n"
    "                   [--small N]\n"
    "  --quick   64 MiB, 3 runs per case (under two minutes on 2 cores)\n"
    "  --smoke   8 MiB, 1 run per case, no peers (checks that every case runs)\n"
    "  --size    checkpoint size (default 256M); several GiB need ~4x that in RAM\n"
    "  --sweep   also time the main cases over sizes, tensor counts and chunk sizes\n"
    "            (for scripts/bench-plot.py); --sweep-only: only that\n"
    "  --process each rep a new process: `rckpt load` (the CLI at --cli) and the\n"
    "            peers in fresh interpreters, warm and cold page cache, at\n"
    "            --process-sizes (default 55M,192M,1G); --process-only: only that\n"
    "  --small   save and load N tiny tensors for the per-tensor cost (100000)\n";

bool ParseSize(const char* s, uint64_t* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || v <= 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; break;
    case 'm': case 'M': mult = 1048576.0; break;
    case 'g': case 'G': mult = 1073741824.0; break;
    case '\0': break;
    default: return false;
  }
  *out = static_cast<uint64_t>(v * mult);
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--quick") {
      f->size = 64ull << 20, f->reps = 3;
    } else if (a == "--smoke") {
      f->size = 8ull << 20, f->reps = 1, f->warmup = 0, f->peers = false, f->smoke = true;
      f->process = true, f->process_sizes = {8ull << 20}, f->small = 2000;
    } else if (a == "--size") {
      if (!(v = next()) || !ParseSize(v, &f->size)) return false;
    } else if (a == "--layers") {
      if (!(v = next())) return false;
      f->layers = std::atoi(v);
    } else if (a == "--reps") {
      if (!(v = next())) return false;
      f->reps = std::max(1, std::atoi(v));
    } else if (a == "--threads") {
      if (!(v = next())) return false;
      f->threads = std::atoi(v);
    } else if (a == "--json") {
      f->json = true;
    } else if (a == "--csv") {
      if (!(v = next())) return false;
      f->csv = v;
    } else if (a == "--sweep") {
      f->sweep = true;
    } else if (a == "--sweep-only") {
      f->sweep = f->sweep_only = true;
    } else if (a == "--process") {
      f->process = true;
    } else if (a == "--process-only") {
      f->process = f->process_only = true;
    } else if (a == "--process-sizes") {
      if (!(v = next())) return false;
      f->process_sizes.clear();
      std::string list = v;
      for (size_t b = 0; b <= list.size();) {
        size_t e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        uint64_t n = 0;
        if (!ParseSize(list.substr(b, e - b).c_str(), &n)) return false;
        f->process_sizes.push_back(n);
        b = e + 1;
      }
    } else if (a == "--cli") {
      if (!(v = next())) return false;
      f->cli = v;
    } else if (a == "--small") {
      if (!(v = next())) return false;
      f->small = std::max(0, std::atoi(v));
    } else if (a == "--no-peers") {
      f->peers = false;
    } else if (a == "--dir") {
      if (!(v = next())) return false;
      f->dir = v;
    } else if (a == "--python") {
      if (!(v = next())) return false;
      f->python = v;
    } else if (a == "--peers-dir") {
      if (!(v = next())) return false;
      f->peers_dir = v;
    } else {
      return false;
    }
  }
  return true;
}

void Die(const Status& s, const std::string& what) {
  std::fprintf(stderr, "rckpt-bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

void Log(const Flags& f, const std::string& msg) {
  if (!f.smoke) std::fprintf(stderr, "[rckpt-bench] %s\n", msg.c_str());
}

// A save configuration and the file it produced.
struct CodecCase {
  std::string name;
  Codec codec;
  int level;
  Shuffle shuffle;
  std::string path;
  CodecRates rates;  // single-thread, on the same chunks
};

// Every chunk the saver would make (4 MiB pieces of each tensor), thinned
// to at most `cap` bytes spread over all tensors.
std::vector<CodecChunk> SampleChunks(const BenchData& data, bool shuffle, uint64_t cap,
                                     std::optional<Kind> only = {}) {
  std::vector<CodecChunk> all;
  uint64_t total = 0;
  for (const BenchTensor& t : data.tensors) {
    if (only && t.kind != *only) continue;
    const auto bytes = t.tensor.host_bytes();
    const uint32_t elem = shuffle ? static_cast<uint32_t>(DTypeSize(t.tensor.dtype())) : 0;
    for (uint64_t off = 0; off < bytes.size(); off += 4ull << 20) {
      all.push_back({bytes.subspan(off, std::min<uint64_t>(4ull << 20, bytes.size() - off)), elem});
      total += all.back().raw.size();
    }
  }
  if (total <= cap) return all;
  std::vector<CodecChunk> picked;
  const double keep = static_cast<double>(cap) / total;
  double acc = 0;
  for (const CodecChunk& c : all) {
    acc += keep;
    if (acc >= 1) {
      acc -= 1;
      picked.push_back(c);
    }
  }
  return picked;
}

double Gbps(uint64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

class Bench {
 public:
  Bench(const Flags& f, BenchData data, std::string dir)
      : f_(f), data_(std::move(data)), dir_(std::move(dir)), threads_(ResolveThreads(f.threads)) {}

  Report Run();

 private:
  using Timed = std::function<double()>;
  // One timed run of each operation (seconds); setup stays outside.
  Timed SaveRun(const CodecCase& c);
  Timed LoadRun(const std::string& path, const LoadOptions& o);
  Timed LoadIntoRun(const std::string& path, const std::vector<LoadTarget>& targets,
                  const LoadOptions& o, bool cold = false);
  Timed WriteRun();
  Timed FirstTouchRun();
  Timed PreadRun(const std::string& path, bool cold = false);
  CodecSample& Sample(const CodecCase& c);
  // Rate (bytes/s) of a limit run from its median seconds.
  double PreadBps(double s) const { return s > 0 ? file_bytes_ / s : 0; }
  double DataBps(double s) const { return s > 0 ? data_.bytes / s : 0; }
  std::vector<LoadTarget> HostTargets();
  void MeasureLimits();
  void SaveCases();
  void LoadCases();
  void DeviceCases();
  void PeerCases();
  void RatioRows();
  CaseResult& Add(CaseResult c) {
    Log(f_, c.name + ": " + std::to_string(c.gbps()) + " GB/s");
    report_.results.push_back(std::move(c));
    return report_.results.back();
  }
  CaseResult* Find(const std::string& name) {
    for (CaseResult& c : report_.results) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }

  const Flags& f_;
  BenchData data_;
  std::string dir_;
  int threads_;
  Checkpoint ck_;
  std::vector<CodecCase> codecs_;
  std::vector<std::vector<std::byte>> into_buffers_;
  Report report_;
  uint64_t file_bytes_ = 0;  // size of the uncompressed file
  std::map<std::string, std::unique_ptr<CodecSample>> samples_;
};

Bench::Timed Bench::SaveRun(const CodecCase& c) {
  return [this, &c] {
    SaveOptions o;
    o.codec = c.codec;
    o.level = c.level;
    o.shuffle = c.shuffle;
    o.threads = threads_;
    const double t0 = Now();
    Status s = Save(c.path, ck_, o);
    if (!s.ok()) Die(s, "save " + c.name);
    return Now() - t0;
  };
}

Bench::Timed Bench::LoadRun(const std::string& path, const LoadOptions& o) {
  return [path, o] {
    const double t0 = Now();
    Result<Checkpoint> ck = Load(path, o);
    const double t = Now() - t0;
    if (!ck.ok()) Die(ck.status(), "load " + path);
    ck = Checkpoint();  // released outside the timed region,
    ::malloc_trim(0);   // and given back: every load gets new memory
    return t;
  };
}

Bench::Timed Bench::LoadIntoRun(const std::string& path, const std::vector<LoadTarget>& targets,
                              const LoadOptions& o, bool cold) {
  return [path, &targets, o, cold] {
    if (cold) DropFromCache(path);
    const double t0 = Now();
    Status s = LoadInto(path, targets, o);
    if (!s.ok()) Die(s, "load_into " + path);
    return Now() - t0;
  };
}

Bench::Timed Bench::WriteRun() {
  return [this] {
    std::vector<std::span<const std::byte>> spans;
    for (const BenchTensor& t : data_.tensors) spans.push_back(t.tensor.host_bytes());
    const std::string path = dir_ + "/plain-write.bin";
    const double t = WriteFsyncSeconds(path, spans);
    std::filesystem::remove(path);
    return t;
  };
}

Bench::Timed Bench::FirstTouchRun() {
  return [this] { return FirstTouchSeconds(data_.bytes, threads_, false); };
}

Bench::Timed Bench::PreadRun(const std::string& path, bool cold) {
  return [this, path, cold] {
    if (cold) DropFromCache(path);
    return PreadSeconds(path, 0, file_bytes_, threads_, 8ull << 20);
  };
}

CodecSample& Bench::Sample(const CodecCase& c) {
  auto& s = samples_[c.name];
  if (s == nullptr) {
    s = std::make_unique<CodecSample>(
        SampleChunks(data_, c.shuffle != Shuffle::kOff, f_.smoke ? 2 << 20 : 16 << 20), c.level);
  }
  return *s;
}

std::vector<LoadTarget> Bench::HostTargets() {
  if (into_buffers_.empty()) {
    for (const BenchTensor& t : data_.tensors) {
      into_buffers_.emplace_back(t.tensor.nbytes(), std::byte{0});  // allocated and touched
    }
  }
  std::vector<LoadTarget> targets;
  for (size_t i = 0; i < data_.tensors.size(); ++i) {
    const BenchTensor& t = data_.tensors[i];
    targets.push_back({t.name, into_buffers_[i].data(), t.tensor.dtype(), t.tensor.shape(),
                       Device::Cpu()});
  }
  return targets;
}

// One-off figures for the limits table; each case measures its own limit
// again, interleaved with itself.
void Bench::MeasureLimits() {
  const uint64_t n = data_.bytes;
  auto& l = report_.limits;
  const std::string t = " (" + std::to_string(threads_) + " threads)";
  const auto m = Interleaved(f_.warmup, f_.reps, {
      WriteRun(), FirstTouchRun(), [&] { return FirstTouchSeconds(n, threads_, true); },
      PreadRun(codecs_.front().path)});
  l["plain write+fsync (1 thread)"] = DataBps(m[0]) / 1e9;
  l["first touch, 4 KiB pages" + t] = DataBps(m[1]) / 1e9;
  l["first touch, MADV_HUGEPAGE" + t] = DataBps(m[2]) / 1e9;
  l["pread 8 MiB into pre-faulted" + t] = PreadBps(m[3]) / 1e9;
  const uint64_t mc = std::min<uint64_t>(n, 512ull << 20);
  l["memcpy touched->touched" + t] =
      mc / Median(f_.warmup, f_.reps, [&] { return MemcpySeconds(mc, threads_); }) / 1e9;
  for (CodecCase& c : codecs_) {
    if (c.codec == Codec::kNone) continue;
    c.rates = MeasureCodec(SampleChunks(data_, c.shuffle != Shuffle::kOff, f_.smoke ? 4 << 20 : 64 << 20),
                           c.level, f_.smoke ? 1 : 3, threads_);
    l["zstd compress 1 thread, " + c.name] = c.rates.compress_bps / 1e9;
    l["zstd decompress 1 thread, " + c.name] = c.rates.decompress_bps / 1e9;
    const std::string all = std::to_string(threads_) + " threads at once (diagnostic), ";
    l["zstd compress " + all + c.name] = c.rates.compress_bps_all / 1e9;
    l["zstd decompress " + all + c.name] = c.rates.decompress_bps_all / 1e9;
    l["xxh3 1 thread"] = c.rates.xxh3_bps / 1e9;
  }
}

void Bench::SaveCases() {
  for (CodecCase& c : codecs_) {
    CaseResult r{.name = "save/" + c.name, .bytes = data_.bytes, .target_ratio = 0.8};
    if (c.codec == Codec::kNone) {
      const auto m = Interleaved(f_.warmup, f_.reps, {SaveRun(c), WriteRun()});
      r.seconds = m[0];
      r.limit = "plain write+fsync";
      r.limit_gbps = DataBps(m[1]) / 1e9;
    } else {
      CodecSample& sample = Sample(c);
      const auto m = Interleaved(f_.warmup, f_.reps, {SaveRun(c), WriteRun(),
                                                      [&] { return sample.CompressSeconds(); }});
      r.seconds = m[0];
      // Compression on all threads, or writing the compressed bytes.
      const double compress = threads_ * sample.raw_bytes() / m[2];
      const uint64_t stored = std::filesystem::file_size(c.path);
      const double write = DataBps(m[1]) * data_.bytes / std::max<uint64_t>(stored, 1);
      r.limit = compress <= write ? std::to_string(threads_) + " x zstd compress 1t"
                                  : "write+fsync of the compressed bytes";
      r.limit_gbps = std::min(compress, write) / 1e9;
      r.extra["file_bytes"] = static_cast<double>(stored);
    }
    Add(r);
  }
}

void Bench::LoadCases() {
  LoadOptions o;
  o.threads = threads_;
  const std::vector<LoadTarget> targets = HostTargets();
  const std::string t = std::to_string(threads_);
  // The default load maps the file; every case also runs as a copying load
  // (the map_file = false opt-out): every byte read into new memory.
  LoadOptions copy = o;
  copy.map_file = false;
  for (const CodecCase& c : codecs_) {
    CaseResult load{.name = "load/" + c.name, .bytes = data_.bytes};
    CaseResult into{.name = "load_into/" + c.name, .bytes = data_.bytes};
    CaseResult mload{.name = "load/" + c.name + " (copy)", .bytes = data_.bytes};
    CaseResult minto{.name = "load_into/" + c.name + " (copy)", .bytes = data_.bytes};
    if (c.codec == Codec::kNone) {
      const auto m = Interleaved(f_.warmup, f_.reps,
                                 {LoadRun(c.path, o), FirstTouchRun(),
                                  LoadIntoRun(c.path, targets, o), PreadRun(c.path),
                                  LoadRun(c.path, copy), LoadIntoRun(c.path, targets, copy)});
      for (CaseResult* r : {&load, &mload}) {
        r->limit = "first touch of new memory";
        r->limit_gbps = DataBps(m[1]) / 1e9;
        r->target_ratio = 2.0;
      }
      for (CaseResult* r : {&into, &minto}) {
        r->limit = "pread into pre-faulted";
        r->limit_gbps = PreadBps(m[3]) / 1e9;
        r->target_ratio = 0.9;
      }
      load.seconds = m[0];
      into.seconds = m[2];
      mload.seconds = m[4];
      minto.seconds = m[5];
    } else {
      CodecSample& sample = Sample(c);
      const auto m = Interleaved(f_.warmup, f_.reps,
                                 {LoadRun(c.path, o), FirstTouchRun(),
                                  LoadIntoRun(c.path, targets, o),
                                  [&] { return sample.DecompressSeconds(); },
                                  LoadRun(c.path, copy), LoadIntoRun(c.path, targets, copy)});
      const double decomp = threads_ * sample.raw_bytes() / m[3];
      const double touch = DataBps(m[1]);
      for (CaseResult* r : {&load, &mload}) {
        r->limit = decomp <= touch ? t + " x zstd decompress 1t" : "first touch of new memory";
        r->limit_gbps = std::min(decomp, touch) / 1e9;
        r->target_ratio = 0.85;
      }
      for (CaseResult* r : {&into, &minto}) {
        r->limit = t + " x zstd decompress 1t";
        r->limit_gbps = decomp / 1e9;
        r->target_ratio = 0.85;
      }
      load.seconds = m[0];
      into.seconds = m[2];
      mload.seconds = m[4];
      minto.seconds = m[5];
    }
    Add(load);
    Add(into);
    Add(mload);
    Add(minto);
  }
  // What checksum verification costs: the same restore with it off.
  const CodecCase& none = codecs_.front();
  LoadOptions off = o;
  off.verify_checksums = false;
  const auto m = Interleaved(f_.warmup, f_.reps, {LoadIntoRun(none.path, targets, o),
                                                  LoadIntoRun(none.path, targets, off)});
  CaseResult ck{.name = "checksum cost: load_into/none", .bytes = data_.bytes, .seconds = m[0],
                .limit = "same load, verification off", .limit_gbps = DataBps(m[1]) / 1e9,
                .target_ratio = 0.97};
  const double xxh3 = report_.limits["xxh3 1 thread"] * 1e9;
  ck.note = "xxh3 on all threads alone takes " +
            std::to_string(static_cast<int>(100.0 * data_.bytes / (threads_ * xxh3) / m[0] + 0.5)) +
            "% of this load's time";
  Add(ck);
  // Cold page cache, where this machine lets us drop it.
  const double resident = DropFromCache(none.path);
  if (resident >= 0 && resident < 0.05) {
    const auto mc = Interleaved(0, f_.reps, {LoadIntoRun(none.path, targets, o, true),
                                             PreadRun(none.path, true),
                                             LoadIntoRun(none.path, targets, off, true)});
    CaseResult cold{.name = "load_into/none (cold cache)", .bytes = data_.bytes,
                    .seconds = mc[0], .limit = "cold pread into pre-faulted",
                    .limit_gbps = PreadBps(mc[1]) / 1e9, .target_ratio = 0.9};
    cold.note = "posix_fadvise(DONTNEED) before each run";
    Add(cold);
    CaseResult cold_ck{.name = "checksum cost: load_into/none (cold cache)",
                       .bytes = data_.bytes, .seconds = mc[0],
                       .limit = "same load, verification off",
                       .limit_gbps = DataBps(mc[2]) / 1e9, .target_ratio = 0.97};
    Add(cold_ck);
  } else {
    report_.skipped.push_back({"cold-cache cases",
                               resident < 0 ? "mincore could not check residency"
                                            : "posix_fadvise(DONTNEED) left " +
                                                  std::to_string(int(resident * 100)) +
                                                  "% of the file cached"});
  }
}

void Bench::DeviceCases() {
  DeviceRuntime* rt = nullptr;
  std::unique_ptr<DeviceRuntime> emulated;
  std::string label;
  auto cuda = CudaRuntime();
  if (cuda.ok() && (*cuda)->DeviceCount().value_or(0) > 0) {
    rt = *cuda;
    label = "cuda";
  } else {
    emulated = NewEmulatedRuntime(1);
    rt = emulated.get();
    label = "emulated";
    report_.info["device"] =
        "no CUDA device: device cases use the emulated runtime (host memory, copies on a worker "
        "thread); their numbers describe the pipeline, not a GPU";
  }
  const Device dev = Device::Cuda(0);
  const uint64_t h2d_bytes = std::min<uint64_t>(data_.bytes, 1ull << 30);
  const double h2d = HostToDeviceBps(*rt, dev, h2d_bytes, f_.reps);
  report_.limits["pinned host-to-device copy (" + label + ")"] = h2d / 1e9;
  LoadOptions o;
  o.threads = threads_;
  o.runtime = rt;
  o.map_location = MapLocation::To(dev);
  LoadStats stats;
  o.stats = &stats;
  for (const CodecCase& c : codecs_) {
    if (c.name != "none" && c.name != "zstd1+shuffle") continue;
    CaseResult r{.name = "device/load/" + c.name + " (" + label + ")", .bytes = data_.bytes};
    double host_side = 0;
    if (c.codec == Codec::kNone) {
      const auto m = Interleaved(f_.warmup, f_.reps, {LoadRun(c.path, o), PreadRun(c.path)});
      r.seconds = m[0];
      host_side = PreadBps(m[1]);
    } else {
      CodecSample& sample = Sample(c);
      const auto m = Interleaved(f_.warmup, f_.reps, {LoadRun(c.path, o),
                                                      [&] { return sample.DecompressSeconds(); }});
      r.seconds = m[0];
      host_side = threads_ * sample.raw_bytes() / m[1];
    }
    r.limit = h2d < host_side ? "pinned host-to-device"
                              : (c.codec == Codec::kNone ? "pread" : "zstd decompress x threads");
    r.limit_gbps = std::min(h2d, host_side) / 1e9;
    if (label == "cuda") r.target_ratio = c.codec == Codec::kNone ? 0.8 : 0.85;
    r.extra["staging_high_water"] = static_cast<double>(stats.staging_high_water);
    r.extra["staging_capacity"] = static_cast<double>(stats.staging_capacity);
    if (stats.staging_high_water > stats.staging_capacity) {
      r.note = "STAGING BOUND EXCEEDED";
      r.seconds = 0;  // marks the case failed
    } else {
      r.note = "staging peak " + std::to_string(stats.staging_high_water >> 20) + " of " +
               std::to_string(stats.staging_capacity >> 20) + " MiB";
    }
    if (label == "emulated") r.note += "; device memory is new host memory (first touch)";
    Add(r);
  }
}

void Bench::PeerCases() {
  struct Link {
    std::string peer, rckpt_case, label;
    double target;
  };
  const std::vector<Link> links = {
      {"torch.load", "load/none", "", 2.0},
      {"torch.load(mmap=True)+touch", "load/none", " vs mmap", 2.0},
      {"torch.load(mmap=True)+touch", "load/none (copy)", " vs mmap", 2.0},
      {"torch.load+load_state_dict", "load_into/none", "", 5.0},
      {"safetensors.load_file+touch", "load/none", " vs safetensors", 1.0},
      {"safetensors.load_file+touch", "load/none (copy)", " vs safetensors", 1.0},
      {"safetensors.load_file+load_state_dict", "load_into/none", " vs safetensors", 1.0},
  };
  std::map<std::string, PeerResult> peers;
  if (f_.peers) {
    const std::string st = dir_ + "/peer.safetensors";
    Status s = WriteSafetensors(data_, st);
    if (!s.ok()) Die(s, "write the peers' safetensors file");
    const std::vector<std::string> args = {"--safetensors", st, "--workdir", dir_, "--warmup",
                                           std::to_string(f_.warmup), "--reps", std::to_string(f_.reps),
                                           "--threads", std::to_string(threads_)};
    // The peers get the same malloc policy as this process (see main).
    ::setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072", 1);
    Log(f_, "running torch peers");
    peers.merge(RunPeerScript(f_.python, f_.peers_dir + "/torch_peer.py", args,
                              {links[0].peer, links[1].peer, links[3].peer}));
    Log(f_, "running safetensors peers");
    peers.merge(RunPeerScript(f_.python, f_.peers_dir + "/safetensors_peer.py", args,
                              {links[4].peer, links[6].peer}));
    std::filesystem::remove(st);
  } else {
    for (const Link& l : links) peers[l.peer].skipped = "peers disabled (--no-peers/--smoke)";
  }
  for (const Link& l : links) {
    const CaseResult* base = Find(l.rckpt_case);
    if (base == nullptr) continue;
    CaseResult r = *base;
    r.name = l.rckpt_case + l.label;
    r.peer = l.peer;
    r.target_speedup = l.target;
    const PeerResult& p = peers[l.peer];
    if (p.skipped.empty()) {
      r.peer_gbps = Gbps(static_cast<uint64_t>(p.bytes), p.seconds);
    } else {
      r.peer_skipped = p.skipped;
      report_.skipped.push_back({"peer " + l.peer, p.skipped});
    }
    if (l.label.empty()) {
      *Find(l.rckpt_case) = r;  // the case row itself carries its main peer
    } else {
      r.target_ratio.reset();   // the limit is judged on the main row
      report_.results.push_back(r);
    }
  }
}

void Bench::RatioRows() {
  const uint64_t cap = f_.smoke ? 2 << 20 : 16 << 20;
  for (Kind kind : {Kind::kWeightBf16, Kind::kWeightF32, Kind::kAdamM, Kind::kAdamV}) {
    for (int level : {1, 3}) {
      for (bool shuffle : {false, true}) {
        const CodecRates r = MeasureCodec(SampleChunks(data_, shuffle, cap, kind), level, 1);
        report_.ratios.push_back({KindName(kind), shuffle ? "shuffle" : "none", level, r.raw_bytes,
                                  r.stored_bytes, r.compress_bps / 1e6, r.decompress_bps / 1e6});
      }
    }
  }
}

Report Bench::Run() {
  auto ck = data_.ToCheckpoint();
  if (!ck.ok()) Die(ck.status(), "build the checkpoint");
  ck_ = std::move(ck).value();
  codecs_ = {{"none", Codec::kNone, 0, Shuffle::kOff, "", {}},
             {"zstd1+shuffle", Codec::kZstd, 1, Shuffle::kOn, "", {}},
             {"zstd1", Codec::kZstd, 1, Shuffle::kOff, "", {}},
             {"zstd3+shuffle", Codec::kZstd, 3, Shuffle::kOn, "", {}}};
  for (CodecCase& c : codecs_) c.path = dir_ + "/" + c.name + ".rckpt";
  // Limits need the uncompressed file; the saves produce every file.
  Log(f_, "saving");
  {
    CodecCase& none = codecs_.front();
    SaveOptions o;
    o.codec = Codec::kNone;
    Status s = Save(none.path, ck_, o);
    if (!s.ok()) Die(s, "save");
    file_bytes_ = std::filesystem::file_size(none.path);
  }
  Log(f_, "measuring limits");
  MeasureLimits();
  SaveCases();
  Log(f_, "loading");
  LoadCases();
  DeviceCases();
  PeerCases();
  RatioRows();
  for (const CodecCase& c : codecs_) std::filesystem::remove(c.path);
  return std::move(report_);
}

// Times the main cases over checkpoint sizes and tensor counts.
void Sweep(const Flags& f, const std::string& dir, Report* report) {
  const int threads = ResolveThreads(f.threads);
  auto run = [&](const std::string& series, uint64_t size, int layers,
                 uint64_t chunk_bytes = SaveOptions().chunk_bytes) {
    auto data = Generate(size, layers, 7, threads);
    if (!data.ok()) Die(data.status(), "generate");
    auto ck = data->ToCheckpoint();
    if (!ck.ok()) Die(ck.status(), "checkpoint");
    const size_t n = data->tensors.size();
    for (Codec codec : {Codec::kNone, Codec::kZstd}) {
      const std::string name = codec == Codec::kNone ? "none" : "zstd1+shuffle";
      const std::string path = dir + "/sweep-" + name + ".rckpt";
      SaveOptions so;
      so.codec = codec;
      so.shuffle = Shuffle::kOn;
      so.threads = threads;
      so.chunk_bytes = chunk_bytes;
      const double ts = Median(1, f.reps, [&] {
        const double t0 = Now();
        if (Status s = Save(path, *ck, so); !s.ok()) Die(s, "save");
        return Now() - t0;
      });
      report->sweep.push_back({series, "save/" + name, data->bytes, n, ts});
      for (bool mapped : {true, false}) {
        if (!mapped && codec != Codec::kNone) continue;
        LoadOptions lo;
        lo.threads = threads;
        lo.map_file = mapped;
        const double tl = Median(1, f.reps, [&] {
          const double t0 = Now();
          auto loaded = Load(path, lo);
          const double t = Now() - t0;
          if (!loaded.ok()) Die(loaded.status(), "load");
          loaded = Checkpoint();
          ::malloc_trim(0);
          return t;
        });
        report->sweep.push_back(
            {series, "load/" + name + (mapped ? "" : " (copy)"), data->bytes, n, tl});
      }
      std::filesystem::remove(path);
    }
    Log(f, "sweep " + std::to_string(data->bytes >> 20) + " MiB, " + std::to_string(n) + " tensors");
  };
  for (uint64_t mib : {16, 64, 256, 1024}) {
    if ((mib << 20) <= std::max<uint64_t>(f.size, 256ull << 20)) run("size", mib << 20, 8);
  }
  for (int layers : {2, 8, 32, 128}) run("tensors", 64ull << 20, layers);
  // Chunk size: rows carry the chunk size in place of the tensor count.
  for (uint64_t chunk_mib : {1, 4, 16, 64}) {
    const size_t first = report->sweep.size();
    run("chunk", 256ull << 20, 2, chunk_mib << 20);
    for (size_t i = first; i < report->sweep.size(); ++i) report->sweep[i].tensors = chunk_mib;
  }
}

std::string MachineInfo() {
  std::string cpu = "?";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  struct utsname u;
  ::uname(&u);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores, " +
         std::to_string(static_cast<long long>(pages) * page >> 30) + " GiB RAM, Linux " +
         u.release;
}

int Main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // A fixed malloc policy (no dynamic mmap threshold, memory returned on
  // free): every load into new memory gets memory fresh from the kernel, as
  // the first load of a restarted training process does. The peers run with
  // the same policy (GLIBC_TUNABLES).
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  std::string dir = f.dir;
  bool own_dir = false;
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / ("rckpt-bench-" + std::to_string(::getpid())))
              .string();
    own_dir = true;
  }
  std::filesystem::create_directories(dir);
  const int threads = ResolveThreads(f.threads);
  Report report;
  if (!f.sweep_only && !f.process_only) {
    Log(f, "generating " + std::to_string(f.size >> 20) + " MiB");
    auto data = Generate(f.size, f.layers, 1, threads);
    if (!data.ok()) Die(data.status(), "generate");
    Bench bench(f, std::move(data).value(), dir);
    report = bench.Run();
  }
  if (!f.sweep_only && f.small > 0) {
    Log(f, "small tensors");
    SmallTensorCases(dir, f.small, f.reps, /*us_per_tensor=*/2.0, &report);
  }
  if (f.process) {
    ProcessOptions po{.cli = f.cli, .python = f.python, .peers_dir = f.peers_dir, .dir = dir,
                      .sizes = f.process_sizes, .reps = f.reps, .warmup = f.warmup,
                      .threads = threads, .peers = f.peers,
                      .log = [&f](const std::string& m) { Log(f, m); }};
    ProcessCases(po, &report);
  }
  if (f.sweep) Sweep(f, dir, &report);
  report.info["machine"] = MachineInfo();
  report.info["threads"] = std::to_string(threads);
  report.info["reps"] = "median of " + std::to_string(f.reps) + " after " +
                        std::to_string(f.warmup) + " warm-up";
  report.info["dir"] = dir;
  report.info["gbps"] = "1e9 bytes/s of raw tensor bytes";
  if (own_dir) std::filesystem::remove_all(dir);
  if (!f.csv.empty()) {
    std::ofstream(f.csv) << RenderCsv(report);
  }
  std::fputs(f.json ? RenderJson(report).c_str() : RenderTable(report).c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace rckpt::bench

int main(int argc, char** argv) { return rckpt::bench::Main(argc, argv); }
