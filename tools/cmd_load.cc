#include <cstdio>

#include "placement_flags.h"
#include "rckpt/io.h"
#include "rckpt_only.h"
#include "render.h"

namespace rckpt::cli {

namespace {

int RunLoad(std::vector<std::string> words) {
  Args args(std::move(words));
  bool json = args.Flag("json");
  bool no_verify = args.Flag("no-verify");
  bool map_file = args.Flag("map-file");
  bool no_map_file = args.Flag("no-map-file");
  Placement placement;
  Status s = ParsePlacementFlags(args, &placement);
  auto staging = args.Value("staging-bytes");
  auto threads = args.Value("threads");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("load", pos.status().message());
  if (!s.ok()) return Fail("load", s);
  if (pos->size() != 1) return Usage("load", "expected exactly one FILE");
  if (map_file && no_map_file) {
    return Usage("load", "--map-file and --no-map-file contradict each other");
  }
  LoadOptions& o = placement.options;
  o.verify_checksums = !no_verify;
  o.map_file = !no_map_file;
  if (staging) {
    auto n = ParseInt("staging-bytes", *staging, 1, int64_t{1} << 40);
    if (!n.ok()) return Fail("load", n.status());
    o.staging_bytes = static_cast<uint64_t>(*n);
  }
  if (threads) {
    auto n = ParseCount("threads", *threads, 1024);
    if (!n.ok()) return Fail("load", n.status());
    o.threads = static_cast<int>(*n);
  }
  if (!json) o.progress = ProgressBar("load");
  auto report = LoadForReport((*pos)[0], o);
  EndProgress();
  if (!report.ok()) return Fail("load", ExplainOtherFormat("load", (*pos)[0], report.status()));
  std::string out = json ? RenderLoadJson(*report) : RenderLoadText(*report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

const CommandInfo kLoad = {
    "load", "load for real (devices included) and report time and throughput",
    std::string(R"(usage: rckpt load FILE [placement options] [--no-verify] [--no-map-file]
                  [--staging-bytes N] [--threads N] [--json]

Loads FILE for real, onto the devices the placement options choose, then
reports bytes, time, throughput, the staging high-water mark of the pinned
ring and where every tensor went. The loaded data is released afterwards.

  --no-verify         skip chunk checksums (they are checked by default)
  --no-map-file       read the file into new memory instead of mapping it.
                      By default the file is mapped: uncompressed host
                      tensors alias the page cache (copy-on-write), other
                      chunks decode straight from it. A mapped file must not
                      be truncated or rewritten in place while its tensors
                      live (rckpt's own saves replace files by rename: safe;
                      cp over it: not); this flag is the opt-out
  --map-file          the default, accepted for older command lines
  --staging-bytes N   size of the pinned staging ring for device-bound data
                      (default 67108864, 64 MiB)
  --threads N         decode threads (default 0: this process's share of the node)
  --json              one JSON object (schema_version 1, docs/CLI.md)

)") + kPlacementHelp + R"(
Exit codes: 0 ok, 2 invalid options, 3 not found, 4 corrupt, 5 unsupported
(newer format version; a PyTorch, safetensors or DCP checkpoint: convert it
first), 6 device unavailable or device error, 7 I/O error, 8 out of memory.
)",
    RunLoad};

}  // namespace rckpt::cli
