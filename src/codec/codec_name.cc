#include "rckpt/options.h"

namespace rckpt {

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone: return "none";
    case Codec::kZstd: return "zstd";
  }
  return "unknown";
}

}  // namespace rckpt
