#include <cstdio>

#include "cli.h"
#include "rckpt/tools.h"

namespace rckpt::cli {
namespace {

int RunInspect(std::vector<std::string> words) {
  Args args(std::move(words));
  bool json = args.Flag("json");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("inspect", pos.status().message());
  if (pos->size() != 1) return Usage("inspect", "expected exactly one FILE");
  auto report = InspectRckpt((*pos)[0]);
  if (!report.ok()) return Fail("inspect", report.status());
  std::string out = json ? RenderInspectJson(*report) : RenderInspectText(*report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

const CommandInfo kInspect = {
    "inspect", "show sections, tensors, RNG records, metadata and the state tree",
    R"(usage: rckpt inspect FILE [--json]

Shows what a checkpoint holds without reading tensor bytes: format version,
writer, metadata, sections with their roles, one row per tensor (name,
section, dtype, shape, origin device, raw bytes, stored bytes, codec), the RNG
records (always restored to cpu) and the state tree.

  --json   one JSON object (schema_version 1, documented in docs/CLI.md)

Exit codes: 0 ok, 2 usage, 3 not found, 4 corrupt, 5 unsupported version.
)",
    RunInspect};

}  // namespace rckpt::cli
