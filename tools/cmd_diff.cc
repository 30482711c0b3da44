#include <cstdio>
#include <cstdlib>

#include "checkpoint_io.h"
#include "cli.h"
#include "rckpt/diff.h"
#include "render.h"

namespace rckpt::cli {
namespace {

Result<double> ParseTolerance(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0)) {
    return Status::InvalidArgument("--" + flag + " '" + text + "': expected a number >= 0");
  }
  return v;
}

int RunDiff(std::vector<std::string> words) {
  Args args(std::move(words));
  bool json = args.Flag("json");
  DiffOptions o;
  o.ignore_devices = args.Flag("ignore-devices");
  auto atol = args.Value("atol");
  auto rtol = args.Value("rtol");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("diff", pos.status().message());
  if (pos->size() != 2) return Usage("diff", "expected two files A and B");
  if (atol) {
    auto v = ParseTolerance("atol", *atol);
    if (!v.ok()) return Fail("diff", v.status());
    o.atol = *v;
  }
  if (rtol) {
    auto v = ParseTolerance("rtol", *rtol);
    if (!v.ok()) return Fail("diff", v.status());
    o.rtol = *v;
  }
  const std::string& a_path = (*pos)[0];
  const std::string& b_path = (*pos)[1];
  auto a = ReadCheckpoint(a_path, std::nullopt, {}, nullptr);
  if (!a.ok()) return Fail("diff", a.status());
  auto b = ReadCheckpoint(b_path, std::nullopt, {}, nullptr);
  if (!b.ok()) return Fail("diff", b.status());
  auto report = DiffCheckpoints(*a, *b, o);
  if (!report.ok()) return Fail("diff", report.status());
  std::string out = json ? RenderDiffJson(*report, a_path, b_path)
                         : RenderDiffText(*report, a_path, b_path);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return report->identical ? 0 : 1;
}

}  // namespace

const CommandInfo kDiff = {
    "diff", "compare two checkpoints of any supported format by content",
    R"(usage: rckpt diff A B [--json] [--atol X] [--rtol Y] [--ignore-devices]

Compares what a restart depends on: tensor names, sections, roles, dtypes,
shapes and bytes (bit for bit: NaN payloads and -0.0 count), origin devices,
RNG records (kind and bytes), the state tree (structure, order and values)
and user metadata. Ignores how the bytes are stored (codec, level, filter,
chunking, alignment), the writer and the creation time: two saves of the same
state are identical whatever their encoding. A and B may be .rckpt, .pt/.pth
or .safetensors files.

  --atol X, --rtol Y  floating-point elements match when |a-b| <= X + Y*|b|
  --ignore-devices    do not compare origin devices
  --json              {"schema_version":1,"identical","count","differences":
                      [{"kind","name","detail"}]} (docs/CLI.md)

Exit codes: 0 identical, 1 different (the differences are listed), 2 usage,
3 not found, 4 corrupt, 5 unsupported (as for inspect), 7 I/O error.
)",
    RunDiff};

}  // namespace rckpt::cli
