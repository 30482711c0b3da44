#include "rckpt_only.h"

#include <filesystem>
#include <system_error>

#include "rckpt/convert.h"

namespace rckpt::cli {

Status ExplainOtherFormat(std::string_view cmd, const std::string& path, const Status& status) {
  std::error_code ec;
  const bool refused_as_file = status.code() == StatusCode::kCorruption;
  const bool refused_as_directory = status.code() == StatusCode::kInvalidArgument &&
                                    std::filesystem::is_directory(path, ec);
  if (!refused_as_file && !refused_as_directory) return status;
  Result<CheckpointFormat> format = DetectFormat(path);
  if (!format.ok()) {
    return format.status().code() == StatusCode::kUnsupported ? format.status() : status;
  }
  std::string what;
  switch (*format) {
    case CheckpointFormat::kPyTorch: what = "a PyTorch zip archive (torch.save)"; break;
    case CheckpointFormat::kSafetensors: what = "a safetensors file"; break;
    case CheckpointFormat::kDcp: what = "a torch.distributed.checkpoint (DCP) directory"; break;
    default: return status;
  }
  return Status::Unsupported("'" + path + "' is " + what + ", not an .rckpt file: rckpt " +
                             std::string(cmd) + " reads .rckpt files only. rckpt.load(\"" +
                             path + "\") reads it as it is (Python), 'rckpt convert " + path +
                             " OUT.rckpt' writes an .rckpt of it, and 'rckpt inspect " + path +
                             "' shows what it holds");
}

}  // namespace rckpt::cli
