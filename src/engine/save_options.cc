#include "engine/save_options.h"

#include <string>

#include "format/layout.h"

namespace rckpt {

Status ValidateSaveOptions(const SaveOptions& o) {
  if (!IsPowerOfTwo(o.alignment) || o.alignment < kMinAlignment || o.alignment > kMaxAlignment) {
    return Status::InvalidArgument("SaveOptions.alignment is " + std::to_string(o.alignment) +
                                   ": expected a power of two in [64, 2^30]");
  }
  if (o.chunk_bytes == 0 || o.chunk_bytes > (1ull << 30)) {
    return Status::InvalidArgument("SaveOptions.chunk_bytes is " + std::to_string(o.chunk_bytes) +
                                   ": expected 1 byte to 1 GiB");
  }
  if (o.codec != Codec::kNone && o.codec != Codec::kZstd) {
    return Status::InvalidArgument("SaveOptions.codec has unknown value " +
                                   std::to_string(static_cast<int>(o.codec)));
  }
  if (o.codec == Codec::kZstd && (o.level < kMinZstdLevel || o.level > kMaxZstdLevel)) {
    return Status::InvalidArgument("SaveOptions.level is " + std::to_string(o.level) +
                                   ": zstd levels run from " + std::to_string(kMinZstdLevel) +
                                   " to " + std::to_string(kMaxZstdLevel));
  }
  if (o.threads < 0) {
    return Status::InvalidArgument("SaveOptions.threads is " + std::to_string(o.threads) +
                                   ": expected 0 (all cores) or more");
  }
  return Status::Ok();
}

}  // namespace rckpt
