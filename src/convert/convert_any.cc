// Format detection and the any-format read/write entry points.
#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "convert/bytes.h"
#include "convert/dcp_import.h"
#include "format/layout.h"
#include "rckpt/convert.h"
#include "rckpt/file.h"
#include "rckpt/io.h"

namespace rckpt {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const char convert::kDcpIsReadOnly[] =
    "output format dcp: rckpt reads DCP directories but does not write them (rckpt.dcp.Reader "
    "loads a .rckpt into dcp.load)";

std::string_view CheckpointFormatName(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::kRckpt: return "rckpt";
    case CheckpointFormat::kPyTorch: return "pytorch";
    case CheckpointFormat::kSafetensors: return "safetensors";
    case CheckpointFormat::kDcp: return "dcp";
    default: return "unknown";
  }
}

CheckpointFormat FormatFromExtension(const std::string& path) {
  std::string p = Lower(path);
  if (EndsWith(p, ".rckpt")) return CheckpointFormat::kRckpt;
  if (EndsWith(p, ".safetensors")) return CheckpointFormat::kSafetensors;
  for (const char* ext : {".pt", ".pth", ".bin", ".ckpt", ".tar"}) {
    if (EndsWith(p, ext)) return CheckpointFormat::kPyTorch;
  }
  return CheckpointFormat::kUnknown;
}

bool FormatUnknownByContentAndName(const std::string& path) {
  Result<CheckpointFormat> detected = DetectFormat(path);
  return detected.ok() && *detected == CheckpointFormat::kUnknown &&
         FormatFromExtension(path) == CheckpointFormat::kUnknown;
}

Result<CheckpointFormat> DetectFormat(const std::string& path, FileSystem* fs_opt) {
  FileSystem& fs = fs_opt ? *fs_opt : DefaultFileSystem();
  Result<std::unique_ptr<RandomAccessFile>> opened = fs.OpenForRead(path);
  if (!opened.ok() && opened.status().code() == StatusCode::kInvalidArgument &&
      fs.ListDir(path).ok()) {
    if (fs.Exists(convert::DcpMetadataPath(path))) return CheckpointFormat::kDcp;
    return Status::InvalidArgument("'" + path +
                            "' is a directory without .metadata: not a "
                            "torch.distributed.checkpoint (DCP) checkpoint, whose directory "
                            "holds .metadata and __<rank>_<n>.distcp files");
  }
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, std::move(opened));
  std::string head(std::min<uint64_t>(f->Size(), 512), '\0');
  RCKPT_RETURN_IF_ERROR(f->ReadAt(0, {reinterpret_cast<std::byte*>(head.data()), head.size()}));
  auto starts = [&](std::string_view m) { return head.compare(0, m.size(), m) == 0; };
  if (head.size() >= 8 && std::equal(kHeaderMagic.begin(), kHeaderMagic.end(),
                                     reinterpret_cast<const uint8_t*>(head.data()))) {
    return CheckpointFormat::kRckpt;
  }
  if (starts("PK\x03\x04")) return CheckpointFormat::kPyTorch;
  if (starts(std::string_view("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14))) {
    return Status::Unsupported(path + ": a pre-1.6 PyTorch legacy (non-zip) checkpoint; "
                               "re-save it with torch >= 1.6: "
                               "torch.save(torch.load(f, weights_only=False), f2)");
  }
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) {
    return Status::Unsupported(path + ": a tar-format torch checkpoint (torch < 0.1.10); "
                               "re-save it with a current torch");
  }
  if (starts("PYTORCH1")) {
    return Status::Unsupported(path + ": the pre-1.0 PyTorch preview archive format; "
                               "re-save it with a current torch");
  }
  if (head.size() >= 9) {
    uint64_t n = convert::Load64(reinterpret_cast<const std::byte*>(head.data()));
    size_t i = 8;
    while (i < head.size() && head[i] == ' ') ++i;
    if (n >= 2 && n <= 100'000'000 && n + 8 <= f->Size() && i < head.size() && head[i] == '{') {
      return CheckpointFormat::kSafetensors;
    }
  }
  return CheckpointFormat::kUnknown;
}

Result<CheckpointFormat> ParseCheckpointFormat(std::string_view name) {
  // The one table of format names; `rckpt convert --help` and rckpt.convert's
  // docstring list the same.
  static constexpr std::pair<std::string_view, CheckpointFormat> kNames[] = {
      {"rckpt", CheckpointFormat::kRckpt},          {"pt", CheckpointFormat::kPyTorch},
      {"pth", CheckpointFormat::kPyTorch},          {"pytorch", CheckpointFormat::kPyTorch},
      {"safetensors", CheckpointFormat::kSafetensors}, {"dcp", CheckpointFormat::kDcp}};
  for (const auto& [text, format] : kNames) {
    if (text == name) return format;
  }
  return Status::InvalidArgument("unknown format '" + std::string(name) +
                                 "': expected rckpt, pt, safetensors or dcp (input only)");
}

Result<Checkpoint> ReadAnyCheckpoint(const std::string& path, const ImportOptions& options,
                                     ImportReport* report) {
  return ReadCheckpointAs(CheckpointFormat::kUnknown, path, options, report);
}

Result<Checkpoint> ReadCheckpointAs(CheckpointFormat format, const std::string& path,
                                    const ImportOptions& options, ImportReport* report) {
  if (format == CheckpointFormat::kUnknown) {
    RCKPT_ASSIGN_OR_RETURN(format, DetectFormat(path, options.fs));
    if (format == CheckpointFormat::kUnknown) format = FormatFromExtension(path);
  }
  switch (format) {
    case CheckpointFormat::kPyTorch: return ImportPyTorch(path, options, report);
    case CheckpointFormat::kSafetensors: return ImportSafetensors(path, options, report);
    case CheckpointFormat::kDcp: return ImportDcp(path, options, report);
    case CheckpointFormat::kRckpt: {
      LoadOptions lo;
      lo.map_location = MapLocation::To(Device::Cpu());  // origins kept, bytes on the host
      lo.fs = options.fs;
      if (report != nullptr) report->format = "rckpt";
      return Load(path, lo);
    }
    default:
      return Status::Unsupported(path + ": not a recognised checkpoint (rckpt, PyTorch zip, "
                                 "safetensors or a DCP directory)");
  }
}

Status WriteAnyCheckpoint(const Checkpoint& ck, const std::string& path,
                          const ExportOptions& options, const SaveOptions& save_options) {
  return WriteCheckpointAs(CheckpointFormat::kUnknown, ck, path, options, save_options);
}

Status WriteCheckpointAs(CheckpointFormat format, const Checkpoint& ck, const std::string& path,
                         const ExportOptions& options, const SaveOptions& save_options) {
  if (format == CheckpointFormat::kUnknown) format = FormatFromExtension(path);
  switch (format) {
    case CheckpointFormat::kPyTorch: return ExportPyTorch(ck, path, options);
    case CheckpointFormat::kSafetensors: return ExportSafetensors(ck, path, options);
    case CheckpointFormat::kRckpt: {
      SaveOptions so = save_options;
      if (so.fs == nullptr) so.fs = options.fs;
      return Save(path, ck, so);
    }
    case CheckpointFormat::kDcp: return Status::InvalidArgument(convert::kDcpIsReadOnly);
    default:
      return Status::InvalidArgument("output '" + path +
                                     "': unknown extension (expected .rckpt, .pt, .pth, .bin, "
                                     ".ckpt or .safetensors)");
  }
}

}  // namespace rckpt
