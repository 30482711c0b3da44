#include <cstdio>
#include <cstdlib>

#include "rckpt/convert.h"
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
  const bool strict = args.Flag("strict");
  const bool tensors_only = args.Flag("tensors-only");
  auto atol = args.Value("atol");
  auto rtol = args.Value("rtol");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("diff", pos.status().message());
  if (pos->size() != 2) return Usage("diff", "expected two files A and B");
  if (strict && tensors_only) {
    return Usage("diff", "--strict and --tensors-only are two different modes: give one");
  }
  if (strict) o.mode = DiffMode::kStrict;
  if (tensors_only) o.mode = DiffMode::kTensors;
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
  ImportReport a_report, b_report;
  auto a = ReadAnyCheckpoint(a_path, {}, &a_report);
  if (!a.ok()) return Fail("diff", a.status());
  auto b = ReadAnyCheckpoint(b_path, {}, &b_report);
  if (!b.ok()) return Fail("diff", b.status());
  o.a_records = a_report.recorded;
  o.b_records = b_report.recorded;
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
    R"(usage: rckpt diff A B [--strict | --tensors-only] [--json] [--atol X] [--rtol Y]
                  [--ignore-devices]

Compares the state a restart depends on. A and B may be .rckpt, .pt/.pth,
.safetensors files or DCP directories, in any pair.

By default it compares what both files record: tensor names, dtypes, shapes
and bytes (bit for bit: NaN payloads and -0.0 count) always; sections and
roles, origin devices, RNG kinds, the state tree, its key order and user
metadata where both formats record them (a plain .pt derives sections from
key names and has no metadata, a plain .safetensors has no tree, a DCP
directory no devices or key order; .rckpt files, and .pt and .safetensors
files rckpt wrote, record everything). The state is compared inside its
containers: an OrderedDict as its items, a collective file's tree as its
"common" part, metadata without the "rckpt." keys that say how a file was
written. What was not compared is listed after the result. It ignores how
bytes are stored (codec, chunking, alignment), the writer and the creation
time: two saves of the same state are identical whatever their encoding.

  --strict            compare everything each checkpoint holds, as held:
                      container types and attributes, key order, sections,
                      RNG kinds, all metadata (a conversion that kept
                      everything is identical under --strict)
  --tensors-only      compare tensor names, dtypes, shapes and bytes only
  --atol X, --rtol Y  floating-point elements match when |a-b| <= X + Y*|b|
  --ignore-devices    do not compare origin devices
  --json              {"schema_version":2,"mode","a","b","identical","count",
                      "differences":[{"kind","name","detail"}],
                      "not_compared":[{"what","why"}]} (docs/CLI.md)

Exit codes: 0 identical, 1 different (the differences are listed), 2 usage,
3 not found, 4 corrupt, 5 unsupported (as for inspect), 7 I/O error.
)",
    RunDiff};

}  // namespace rckpt::cli
