// Reading and writing checkpoints of any supported format for the CLI, with
// --from/--to overriding what the file name says.
#ifndef RCKPT_TOOLS_CHECKPOINT_IO_H_
#define RCKPT_TOOLS_CHECKPOINT_IO_H_

#include <optional>
#include <string>

#include "rckpt/convert.h"

namespace rckpt::cli {

// "rckpt", "pt"/"pytorch", "safetensors"; InvalidArgument otherwise.
Result<CheckpointFormat> ParseFormat(const std::string& text);

// Reads `path` (format forced by `format`, else detected) into host memory.
Result<Checkpoint> ReadCheckpoint(const std::string& path, std::optional<CheckpointFormat> format,
                                  const ImportOptions& options, ImportReport* report);

// Writes `ck` to `path` (format forced by `format`, else by extension).
Status WriteCheckpoint(const Checkpoint& ck, const std::string& path,
                       std::optional<CheckpointFormat> format, const ExportOptions& export_options,
                       const SaveOptions& save_options);

}  // namespace rckpt::cli

#endif  // RCKPT_TOOLS_CHECKPOINT_IO_H_
