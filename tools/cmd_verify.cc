#include <chrono>
#include <cstdio>

#include "cli.h"
#include "rckpt/human_bytes.h"
#include "rckpt_only.h"
#include "render.h"

namespace rckpt::cli {
namespace {

int RunVerify(std::vector<std::string> words) {
  Args args(std::move(words));
  bool quiet = args.Flag("quiet");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("verify", pos.status().message());
  if (pos->size() != 1) return Usage("verify", "expected exactly one FILE");
  const std::string& path = (*pos)[0];
  VerifyReport report;
  auto start = std::chrono::steady_clock::now();
  Status s = VerifyRckpt(path, &report, quiet ? ProgressCallback{} : ProgressBar("verify"));
  EndProgress();
  if (!s.ok()) return Fail("verify", ExplainOtherFormat("verify", path, s));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) {
    std::printf("%s: OK (%llu tensors, %llu chunks, %llu RNG records, %s stored, %s raw; "
                "every checksum matches; %.2f s, %s)\n",
                path.c_str(), (unsigned long long)report.tensors,
                (unsigned long long)report.chunks, (unsigned long long)report.rng_records,
                HumanBytes(report.stored_bytes).c_str(), HumanBytes(report.raw_bytes).c_str(), secs,
                RenderRate(report.stored_bytes, secs).c_str());
  }
  return 0;
}

}  // namespace

const CommandInfo kVerify = {
    "verify", "check the structure and every checksum of an .rckpt file",
    R"(usage: rckpt verify FILE [--quiet]

Checks the header, footer, manifest checksum, the manifest's structure
(extents inside the data region, no overlaps, sizes consistent with dtypes
and shapes, valid tree) and then reads and decodes every chunk, comparing its
XXH3-64 checksum. Exits 0 only when the whole file is sound; otherwise prints
one line naming what is wrong and where.

  --quiet  print nothing on success

FILE must be an .rckpt file: a PyTorch, safetensors or DCP checkpoint is
refused (exit 5) saying so; rckpt inspect shows one and rckpt convert makes
an .rckpt of it.

Exit codes: 0 sound, 2 usage, 3 not found, 4 corrupt (damaged or truncated),
5 unsupported (newer format version; a checkpoint of another format), 7 I/O
error.
)",
    RunVerify};

}  // namespace rckpt::cli
