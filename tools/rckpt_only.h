// Commands that read only .rckpt files (verify, plan, load) given a file of
// another format that rckpt reads: the error says what the file is and what
// reads it, with the Unsupported code (exit 5), instead of the rckpt
// reader's "bad magic" (Corruption, exit 4).
#ifndef RCKPT_TOOLS_RCKPT_ONLY_H_
#define RCKPT_TOOLS_RCKPT_ONLY_H_

#include <string>
#include <string_view>

#include "rckpt/status.h"

namespace rckpt::cli {

// `status` of `rckpt <cmd> <path>`, unless the reader refused `path` because
// it is not an .rckpt file (Corruption) or a directory (InvalidArgument) and
// it is a PyTorch zip archive, a safetensors file or a DCP directory: then
// Unsupported, naming `path`, its format, rckpt.load and `rckpt convert`. A
// legacy torch file gets DetectFormat's Unsupported (how to re-save it).
// Every other status (options, a missing file, a damaged .rckpt) is returned
// as it is.
Status ExplainOtherFormat(std::string_view cmd, const std::string& path, const Status& status);

}  // namespace rckpt::cli

#endif  // RCKPT_TOOLS_RCKPT_ONLY_H_
