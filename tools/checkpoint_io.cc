#include "checkpoint_io.h"

#include "rckpt/io.h"

namespace rckpt::cli {

Result<CheckpointFormat> ParseFormat(const std::string& text) {
  if (text == "rckpt") return CheckpointFormat::kRckpt;
  if (text == "pt" || text == "pytorch" || text == "pth") return CheckpointFormat::kPyTorch;
  if (text == "safetensors") return CheckpointFormat::kSafetensors;
  if (text == "dcp") return CheckpointFormat::kDcp;
  return Status::InvalidArgument("unknown format '" + text +
                                 "': expected rckpt, pt, safetensors or dcp (input only)");
}

Result<Checkpoint> ReadCheckpoint(const std::string& path, std::optional<CheckpointFormat> format,
                                  const ImportOptions& options, ImportReport* report) {
  if (!format) return ReadAnyCheckpoint(path, options, report);
  switch (*format) {
    case CheckpointFormat::kPyTorch: return ImportPyTorch(path, options, report);
    case CheckpointFormat::kSafetensors: return ImportSafetensors(path, options, report);
    case CheckpointFormat::kDcp: return ImportDcp(path, options, report);
    case CheckpointFormat::kRckpt: {
      if (report) report->format = "rckpt";
      LoadOptions lo;
      lo.map_location = MapLocation::To(Device::Cpu());
      lo.fs = options.fs;
      return Load(path, lo);
    }
    default: return Status::InvalidArgument("unknown input format");
  }
}

Status WriteCheckpoint(const Checkpoint& ck, const std::string& path,
                       std::optional<CheckpointFormat> format, const ExportOptions& export_options,
                       const SaveOptions& save_options) {
  if (!format) return WriteAnyCheckpoint(ck, path, export_options, save_options);
  switch (*format) {
    case CheckpointFormat::kPyTorch: return ExportPyTorch(ck, path, export_options);
    case CheckpointFormat::kSafetensors: return ExportSafetensors(ck, path, export_options);
    case CheckpointFormat::kRckpt: return Save(path, ck, save_options);
    case CheckpointFormat::kDcp:
      return Status::InvalidArgument("--to dcp: rckpt convert reads DCP directories but does "
                                     "not write them (load the .rckpt with rckpt.dcp.Reader)");
    default: return Status::InvalidArgument("unknown output format");
  }
}

}  // namespace rckpt::cli
