// Convert (convert.h): what `rckpt convert` and rckpt.convert do. The front
// ends parse their arguments into ConvertOptions and render ConvertReport.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "convert/dcp_import.h"
#include "io/url_file_system.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/human_bytes.h"

namespace rckpt {
namespace {

namespace fs = std::filesystem;

// What is checked of the output before the (possibly long) read of the
// input. An object-storage URL's form is checked; nothing is sent before the
// first bytes are written.
Status CheckOutput(const std::string& dst, CheckpointFormat to, FileSystem& files) {
  RCKPT_RETURN_IF_ERROR(CheckSchemeCase(dst));  // "S3://" is no local path either
  if (to == CheckpointFormat::kDcp) return Status::InvalidArgument(convert::kDcpIsReadOnly);
  if (IsObjectStoreUrl(dst)) {
    Result<std::unique_ptr<AtomicWritableFile>> w = files.OpenForAtomicWrite(dst);
    if (!w.ok()) return w.status().WithContext("output '" + dst + "'");
    RCKPT_RETURN_IF_ERROR((*w)->Abort());
  } else {
    std::error_code ec;
    if (fs::is_directory(dst, ec)) {
      return Status::InvalidArgument("output '" + dst +
                                     "' is a directory: expected a file path such as '" +
                                     (fs::path(dst) / "out.rckpt").string() + "'");
    }
    const fs::path parent = fs::path(dst).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      return Status::NotFound("output '" + dst + "': directory '" + parent.string() +
                              "' does not exist (create it first)");
    }
  }
  if (to != CheckpointFormat::kUnknown || FormatFromExtension(dst) != CheckpointFormat::kUnknown) {
    return Status::Ok();
  }
  return Status::InvalidArgument(
      "output '" + dst +
      "': no known extension (.rckpt; .pt .pth .bin .ckpt; .safetensors): name its format "
      "with --to rckpt|pt|safetensors (rckpt.convert: to_format=)");
}

// An input that is none of the formats by content or by name gets the hint
// for naming its format; one that cannot be read is left to the read, which
// says why.
Status CheckInputNamesAFormat(const std::string& src, FileSystem& files) {
  Result<CheckpointFormat> detected = DetectFormat(src, &files);
  if (!detected.ok() || *detected != CheckpointFormat::kUnknown ||
      FormatFromExtension(src) != CheckpointFormat::kUnknown) {
    return Status::Ok();
  }
  return Status::Unsupported(
      "input '" + src +
      "': not a recognised checkpoint (rckpt, PyTorch zip, safetensors or a DCP directory) and "
      "no known extension: if it is one of them, name its format with --from "
      "rckpt|pt|safetensors|dcp (rckpt.convert: from_format=)");
}

// Where a DCP directory's tensors are staged, one at a time: beside the
// output, or in the temporary directory for an object-storage output.
std::string ScratchDirFor(const std::string& dst) {
  std::error_code ec;
  std::string dir = IsObjectStoreUrl(dst) ? fs::temp_directory_path(ec).string()
                                          : fs::path(dst).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Only the recorded origins change; bytes stay as they are.
Status RewriteOrigins(const MapLocation& set_device, Checkpoint* ck) {
  if (!set_device.is_set()) return Status::Ok();
  // A bare "cuda" is cuda:0 as a recorded origin (ParseRecordedDevice).
  RCKPT_ASSIGN_OR_RETURN(MapLocation map, set_device.WithCurrentCuda(Device::Cuda(0)));
  for (TensorEntry& t : ck->mutable_tensors()) {
    TensorInfo info;
    info.name = t.name;
    info.section = t.section;
    info.role = t.role;
    info.dtype = t.tensor.dtype();
    info.shape = t.tensor.shape();
    info.origin = t.Origin();
    t.origin = map.Apply(info);
  }
  for (RngRecord& r : ck->mutable_rng()) {
    TensorInfo info;
    info.name = r.name;
    info.origin = r.origin;
    r.origin = map.Apply(info);
  }
  return Status::Ok();
}

std::string Summary(const std::string& src, const std::string& dst, const ConvertReport& r) {
  char line[160];
  std::snprintf(line, sizeof line, ": %zu tensor%s, %zu RNG record%s, %s in %.2f s (%s)",
                r.tensors, r.tensors == 1 ? "" : "s", r.rng_records, r.rng_records == 1 ? "" : "s",
                HumanBytes(r.tensor_bytes).c_str(), r.seconds,
                RenderRate(r.tensor_bytes, r.seconds).c_str());
  return src + " -> " + dst + line;
}

}  // namespace

Status Convert(const std::string& src, const std::string& dst, const ConvertOptions& options,
               ConvertReport* report) {
  const auto start = std::chrono::steady_clock::now();
  FileSystem& files = options.fs != nullptr ? *options.fs : DefaultFileSystem();
  RCKPT_RETURN_IF_ERROR(CheckOutput(dst, options.to, files));
  if (options.from == CheckpointFormat::kUnknown) {
    RCKPT_RETURN_IF_ERROR(CheckInputNamesAFormat(src, files));
  }
  ConvertReport out;
  ImportOptions import = options.import;
  if (import.fs == nullptr) import.fs = &files;
  if (import.scratch_dir.empty()) import.scratch_dir = ScratchDirFor(dst);
  RCKPT_ASSIGN_OR_RETURN(Checkpoint ck, ReadCheckpointAs(options.from, src, import, &out.read));
  RCKPT_RETURN_IF_ERROR(RewriteOrigins(options.set_device, &ck));
  ExportOptions exporter = options.exporter;
  if (exporter.fs == nullptr) exporter.fs = &files;
  exporter.report = &out.written;
  SaveOptions save = options.save;
  if (save.fs == nullptr) save.fs = &files;
  RCKPT_RETURN_IF_ERROR(WriteCheckpointAs(options.to, ck, dst, exporter, save));
  if (report == nullptr) return Status::Ok();
  out.tensors = ck.tensors().size();
  out.rng_records = ck.rng().size();
  out.tensor_bytes = ck.TensorBytes();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.summary = Summary(src, dst, out);
  *report = std::move(out);
  return Status::Ok();
}

}  // namespace rckpt
