#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "checkpoint_io.h"
#include "cli.h"
#include "io/url_file_system.h"
#include "rckpt/file.h"
#include "rckpt/human_bytes.h"
#include "render.h"

namespace rckpt::cli {
namespace {

Result<std::map<Device, Device>> ParseDeviceMap(const std::string& text) {
  std::map<Device, Device> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string pair = text.substr(start, end - start);
    size_t eq = pair.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("--set-device '" + pair + "': expected FROM=TO, e.g. cuda:1=cuda:0");
    }
    RCKPT_ASSIGN_OR_RETURN(Device from, ParseRecordedDevice(pair.substr(0, eq)));
    RCKPT_ASSIGN_OR_RETURN(Device to, ParseRecordedDevice(pair.substr(eq + 1)));
    out[from] = to;
    start = end + 1;
  }
  if (out.empty()) return Status::InvalidArgument("--set-device needs FROM=TO");
  return out;
}

Status CheckOutputPath(const std::string& out) {
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(out));  // "S3://" is no local path either
  if (IsObjectStoreUrl(out)) {
    // The URL's form is checked now; an object store sends nothing before
    // the first bytes are written.
    Result<std::unique_ptr<AtomicWritableFile>> w = DefaultFileSystem().OpenForAtomicWrite(out);
    if (!w.ok()) return w.status().WithContext("output '" + out + "'");
    return (*w)->Abort();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec)) {
    return Status::InvalidArgument("output '" + out +
                                   "' is a directory: expected a file path such as '" +
                                   (std::filesystem::path(out) / "out.rckpt").string() + "'");
  }
  std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return Status::NotFound("output '" + out + "': directory '" + parent.string() +
                            "' does not exist (create it first)");
  }
  return Status::Ok();
}

// Without --to the output's format comes from its extension; a name without
// a known one (the demo's `part.ck`) needs --to, and the error says so.
Status CheckOutputNamesAFormat(const std::string& out) {
  if (FormatFromExtension(out) != CheckpointFormat::kUnknown) return Status::Ok();
  return Status::InvalidArgument(
      "output '" + out +
      "': no known extension (.rckpt; .pt .pth .bin .ckpt; .safetensors): name its format "
      "with --to rckpt|pt|safetensors");
}

// Input formats are recognised by content first; a file that is none of the
// three and has no known extension gets the hint for --from.
Status CheckInputNamesAFormat(const std::string& in) {
  if (!FormatUnknownByContentAndName(in)) return Status::Ok();  // a missing file: the read says so
  return Status::Unsupported(
      "input '" + in +
      "': not a recognised checkpoint (rckpt, PyTorch zip, safetensors or a DCP directory) "
      "and no known extension: if it is one of them, name its format with --from "
      "rckpt|pt|safetensors");
}

int RunConvert(std::vector<std::string> words) {
  Args args(std::move(words));
  ImportOptions in_opts;
  ExportOptions out_opts;
  SaveOptions save;
  in_opts.strict = args.Flag("strict");
  out_opts.drop_objects = args.Flag("drop-objects");
  in_opts.rng_keys = args.Values("rng-key");
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
    in_opts.section_overrides[s.substr(0, eq)] = s.substr(eq + 1);
  }
  std::optional<CheckpointFormat> in_format, out_format;
  if (from) {
    auto f = ParseFormat(*from);
    if (!f.ok()) return Fail("convert", f.status());
    in_format = *f;
  }
  if (to) {
    auto f = ParseFormat(*to);
    if (!f.ok()) return Fail("convert", f.status());
    if (*f == CheckpointFormat::kDcp) {
      return Fail("convert", Status::InvalidArgument(
                                 "--to dcp: rckpt convert reads DCP directories but does not "
                                 "write them (rckpt.dcp.Reader loads a .rckpt into dcp.load)"));
    }
    out_format = *f;
  }
  if (codec) {
    if (*codec == "none") save.codec = Codec::kNone;
    else if (*codec == "zstd") save.codec = Codec::kZstd;
    else return Fail("convert", Status::InvalidArgument("--codec '" + *codec + "': expected none or zstd"));
  }
  if (level) {
    auto v = ParseInt("level", *level, kMinZstdLevel, kMaxZstdLevel);
    if (!v.ok()) return Fail("convert", v.status());
    save.level = static_cast<int>(*v);
  }
  if (chunk) {
    auto v = ParseInt("chunk-size", *chunk, 1, int64_t{1} << 30);
    if (!v.ok()) return Fail("convert", v.status());
    save.chunk_bytes = static_cast<uint64_t>(*v);
  }
  if (shuffle) {
    if (*shuffle == "auto") save.shuffle = Shuffle::kAuto;
    else if (*shuffle == "on") save.shuffle = Shuffle::kOn;
    else if (*shuffle == "off") save.shuffle = Shuffle::kOff;
    else return Fail("convert", Status::InvalidArgument("--shuffle '" + *shuffle + "': expected auto, on or off"));
  }
  std::map<Device, Device> devices;
  for (const auto& s : set_device) {
    auto m = ParseDeviceMap(s);
    if (!m.ok()) return Fail("convert", m.status());
    devices.insert(m->begin(), m->end());
  }
  const std::string& in = (*pos)[0];
  const std::string& out = (*pos)[1];
  // Checked before the (possibly long) read of IN.
  Status out_ok = CheckOutputPath(out);
  if (out_ok.ok() && !out_format) out_ok = CheckOutputNamesAFormat(out);
  if (!out_ok.ok()) return Fail("convert", out_ok);
  auto start = std::chrono::steady_clock::now();
  // A DCP directory's tensors are staged beside the output, one at a time.
  // (An object-storage output stages them in the temporary directory.)
  std::error_code tmp_ec;
  in_opts.scratch_dir = IsObjectStoreUrl(out)
                            ? std::filesystem::temp_directory_path(tmp_ec).string()
                            : std::filesystem::path(out).parent_path().string();
  if (in_opts.scratch_dir.empty()) in_opts.scratch_dir = ".";
  ImportReport report;
  if (!in_format) {
    Status in_ok = CheckInputNamesAFormat(in);
    if (!in_ok.ok()) return Fail("convert", in_ok);
  }
  auto ck = ReadCheckpoint(in, in_format, in_opts, &report);
  if (!ck.ok()) return Fail("convert", ck.status());
  for (const auto& w : report.warnings) std::fprintf(stderr, "rckpt convert: warning: %s\n", w.c_str());
  if (!report.inert_classes.empty()) {
    std::string classes;
    for (const auto& c : report.inert_classes) classes += (classes.empty() ? "" : ", ") + c;
    std::fprintf(stderr,
                 "rckpt convert: warning: kept as inert objects (never executed): %s "
                 "(--strict refuses them)\n",
                 classes.c_str());
  }
  for (auto& t : ck->mutable_tensors()) {
    auto it = devices.find(t.Origin());
    if (it != devices.end()) t.origin = it->second;
  }
  // Only the recorded origins change; bytes stay as they are.
  for (auto& r : ck->mutable_rng()) {
    auto it = devices.find(r.origin);
    if (it != devices.end()) r.origin = it->second;
  }
  save.progress = ProgressBar("convert");
  ExportReport written;
  out_opts.report = &written;
  Status s = WriteCheckpoint(*ck, out, out_format, out_opts, save);
  EndProgress();
  if (!s.ok()) return Fail("convert", s);
  for (const auto& w : written.not_kept) {
    std::fprintf(stderr, "rckpt convert: warning: %s does not keep %s\n", out.c_str(), w.c_str());
  }
  for (const auto& n : written.notes) {
    std::fprintf(stderr, "rckpt convert: note: %s: %s\n", out.c_str(), n.c_str());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t bytes = ck->TensorBytes();
  std::printf("%s -> %s: %zu tensor%s, %zu RNG record%s, %s in %.2f s (%s)\n", in.c_str(),
              out.c_str(), ck->tensors().size(), ck->tensors().size() == 1 ? "" : "s",
              ck->rng().size(), ck->rng().size() == 1 ? "" : "s", HumanBytes(bytes).c_str(), secs,
              RenderRate(bytes, secs).c_str());
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
  --set-device FROM=TO   rewrite recorded origin devices, e.g. cuda:1=cuda:0
                         (repeatable or comma-separated; bytes unchanged)

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
