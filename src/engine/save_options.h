// The check every save runs on its SaveOptions before it opens a file.
#ifndef RCKPT_SRC_ENGINE_SAVE_OPTIONS_H_
#define RCKPT_SRC_ENGINE_SAVE_OPTIONS_H_

#include "rckpt/options.h"
#include "rckpt/status.h"

namespace rckpt {

// InvalidArgument naming the field, its value and the accepted range for
// options a save cannot use (include/rckpt/options.h documents the ranges).
Status ValidateSaveOptions(const SaveOptions& options);

}  // namespace rckpt

#endif  // RCKPT_SRC_ENGINE_SAVE_OPTIONS_H_
