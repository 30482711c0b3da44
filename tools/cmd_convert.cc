#include <cstdio>

#include "cli.h"
#include "rckpt/convert.h"
#include "render.h"

namespace rckpt::cli {
namespace {

// The flag's values, parsed as one: repeated flags are joined by commas, so
// a device mapped twice across them is refused as within one.
Result<MapLocation> ParseSetDevice(const std::vector<std::string>& values) {
  std::string spec;
  for (const std::string& v : values) spec += (spec.empty() ? "" : ",") + v;
  return MapLocation::Parse(spec, "set_device");  // "--set-device" in the message (Fail)
}

int RunConvert(std::vector<std::string> words) {
  Args args(std::move(words));
  ConvertOptions o;
  o.import.strict = args.Flag("strict");
  o.exporter.drop_objects = args.Flag("drop-objects");
  o.import.rng_keys = args.Values("rng-key");
  auto sections = args.Values("section");
  auto from = args.Value("from");
  auto to = args.Value("to");
  auto codec = args.Value("codec");
  auto level = args.Value("level");
  auto chunk = args.Value("chunk-size");
  auto shuffle = args.Value("shuffle");
  auto set_device = args.Values("set-device");
  auto pos = args.Positional();
  if (!pos.ok()) return Usage("convert", pos.status().message());
  if (pos->size() != 2) return Usage("convert", "expected IN and OUT");
  for (const auto& s : sections) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
      return Fail("convert", Status::InvalidArgument("--section '" + s + "': expected KEY=SECTION"));
    }
    o.import.section_overrides[s.substr(0, eq)] = s.substr(eq + 1);
  }
  if (from) {
    auto f = ParseCheckpointFormat(*from);
    if (!f.ok()) return Fail("convert", f.status());
    o.from = *f;
  }
  if (to) {
    auto f = ParseCheckpointFormat(*to);
    if (!f.ok()) return Fail("convert", f.status());
    o.to = *f;
  }
  if (codec) {
    auto c = ParseCodec(*codec);
    if (!c.ok()) return Fail("convert", c.status());
    o.save.codec = *c;
  }
  if (level) {
    auto v = ParseInt("level", *level, kMinZstdLevel, kMaxZstdLevel);
    if (!v.ok()) return Fail("convert", v.status());
    o.save.level = static_cast<int>(*v);
  }
  if (chunk) {
    auto v = ParseInt("chunk-size", *chunk, 1, int64_t{1} << 30);
    if (!v.ok()) return Fail("convert", v.status());
    o.save.chunk_bytes = static_cast<uint64_t>(*v);
  }
  if (shuffle) {
    auto s = ParseShuffle(*shuffle);
    if (!s.ok()) return Fail("convert", s.status());
    o.save.shuffle = *s;
  }
  if (!set_device.empty()) {
    auto m = ParseSetDevice(set_device);
    if (!m.ok()) return Fail("convert", m.status());
    o.set_device = *std::move(m);
  }
  const std::string& in = (*pos)[0];
  const std::string& out = (*pos)[1];
  o.save.progress = ProgressBar("convert");
  ConvertReport report;
  Status s = Convert(in, out, o, &report);
  EndProgress();
  if (!s.ok()) return Fail("convert", s);
  for (const auto& w : report.read.warnings) {
    std::fprintf(stderr, "rckpt convert: warning: %s\n", w.c_str());
  }
  if (!report.read.inert_classes.empty()) {
    std::string classes;
    for (const auto& c : report.read.inert_classes) classes += (classes.empty() ? "" : ", ") + c;
    std::fprintf(stderr,
                 "rckpt convert: warning: kept as inert objects (never executed): %s "
                 "(--strict refuses them)\n",
                 classes.c_str());
  }
  for (const auto& w : report.written.not_kept) {
    std::fprintf(stderr, "rckpt convert: warning: %s does not keep %s\n", out.c_str(), w.c_str());
  }
  for (const auto& n : report.written.notes) {
    std::fprintf(stderr, "rckpt convert: note: %s: %s\n", out.c_str(), n.c_str());
  }
  std::printf("%s\n", report.summary.c_str());
  return 0;
}

// The usage text below spells the zstd level range out.
static_assert(kMinZstdLevel == -7 && kMaxZstdLevel == 22);

}  // namespace

const CommandInfo kConvert = {
    "convert",
    "convert between .rckpt, PyTorch .pt and .safetensors, from DCP directories, or re-encode",
    R"(usage: rckpt convert IN OUT [options]

Formats come from the file names (.rckpt; .pt .pth .bin .ckpt; .safetensors)
or, for names without one of these extensions (e.g. part.ck), from --from/--to;
an input is also recognised by its content. PyTorch files are read by a restricted unpickler that never
executes anything; unknown classes are kept as inert objects (listed as a
warning) unless --strict. Every tensor is kept bit for bit with the device it
was saved on; RNG states under well-known keys become RNG records.

Everything the output format can carry is kept: rckpt -> pt -> rckpt and
rckpt -> safetensors -> rckpt give back the same checkpoint (rckpt diff
--strict says identical). rckpt's sections, roles, RNG kinds and metadata
travel in a .pt as the record .data/rckpt.json and in a .safetensors as
rckpt.* keys of __metadata__. What OUT cannot hold is refused (c128 in
.safetensors, inert objects in .pt without --drop-objects) or named on stderr
("warning: OUT does not keep ..."); parts only rckpt reads back from OUT are
named as a note.

IN may also be a torch.distributed.checkpoint (DCP) directory, as
dcp.save(state_dict, checkpoint_id=DIR) leaves it (DIR/.metadata and
__<rank>_<n>.distcp files). Its .metadata is read by the same unpickler with
only DCP's metadata classes allowed. The output holds the original nested
state dict: each tensor at its key path, named by DCP's fqn ("model.w"), in
the section of its first key; a tensor saved sharded over ranks is assembled
whole; other values as they were. Memory holds one tensor at a time: each
is staged in a scratch file beside OUT (.rckpt-dcp-scratch-<pid>-<n>, removed
when done; it needs as much free disk as the tensors take) and read back
through a mapping while OUT is written. rckpt.dcp.Reader and rckpt.load read
the result.

input options:
  --from FMT, --to FMT   rckpt, pt or safetensors (and dcp for --from): the
                         input's / output's format whatever its name
  --strict               refuse files holding classes outside the known set
  --rng-key KEY          also treat uint8 tensors under KEY as RNG states
                         (repeatable)
  --section KEY=SECTION  put top-level KEY into SECTION (repeatable)
output options:
  --drop-objects         export inert objects as None instead of refusing
  --codec none|zstd      .rckpt output codec (default none)
  --level N              zstd level, -7 to 22 (default 1)
  --chunk-size BYTES     chunk size, 1 to 1073741824 (default 4194304)
  --shuffle auto|on|off  byte-shuffle before zstd (auto: floating-point)
  --set-device MAP       rewrite recorded origin devices (bytes unchanged),
                         as --map-location of load names them: FROM=TO
                         pairs (cuda:1=cuda:0, repeatable or
                         comma-separated; a device mapped twice is refused)
                         or one device for every origin

examples:
  rckpt convert best_checkpoint.pt best.rckpt
  rckpt convert best.rckpt best.safetensors
  rckpt convert checkpoints/step_1000 step_1000.rckpt      (a DCP directory)
  rckpt convert run.rckpt run-gpu0.rckpt --set-device cuda:1=cuda:0

Exit codes: 0 ok, 2 usage, 3 not found, 4 corrupt input, 5 unsupported
(legacy or TorchScript files, code-executing pickles, --strict classes),
7 I/O error.
)",
    RunConvert};

}  // namespace rckpt::cli
