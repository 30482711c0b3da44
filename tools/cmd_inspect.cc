#include <cstdio>

#include "cli.h"
#include "rckpt/convert.h"
#include "render.h"

namespace rckpt::cli {
namespace {

int RunInspect(std::vector<std::string> words) {
  Args args(std::move(words));
  bool json = args.Flag("json");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("inspect", pos.status().message());
  if (pos->size() != 1) return Usage("inspect", "expected exactly one FILE");
  const std::string& path = (*pos)[0];
  auto format = DetectFormat(path);
  if (!format.ok()) return Fail("inspect", format.status());
  Result<InspectReport> report = Status::InvalidArgument("unreachable");
  if (*format == CheckpointFormat::kRckpt || *format == CheckpointFormat::kUnknown) {
    report = InspectRckpt(path);
  } else {
    // Other formats are shown as the checkpoint a conversion would produce.
    ImportReport imported;
    auto ck = ReadAnyCheckpoint(path, {}, &imported);
    if (!ck.ok()) return Fail("inspect", ck.status());
    report = InspectCheckpoint(*ck, path, std::string(CheckpointFormatName(*format)));
    report->warnings = imported.warnings;
    for (const auto& c : imported.inert_classes) {
      report->warnings.push_back("inert object (kept as data, never executed): " + c);
    }
  }
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
records (always restored to cpu) and the state tree. FILE may also be a
PyTorch .pt/.pth or a .safetensors file: it is then shown as the checkpoint
`rckpt convert` would produce (stored sizes equal raw sizes).

  --json   one JSON object (schema_version 1, documented in docs/CLI.md)

Exit codes: 0 ok, 2 usage, 3 not found, 4 corrupt or not a checkpoint,
5 unsupported (newer format version, legacy or TorchScript .pt, a pickle
that would execute code), 7 I/O error.
)",
    RunInspect};

}  // namespace rckpt::cli
