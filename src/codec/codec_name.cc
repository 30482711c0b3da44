// The names of the codec and shuffle options, one table each, for every
// front end (the CLI's flags, the Python package's arguments).
#include <string>

#include "rckpt/options.h"

namespace rckpt {

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone: return "none";
    case Codec::kZstd: return "zstd";
  }
  return "unknown";
}

Result<Codec> ParseCodec(std::string_view name) {
  for (Codec c : {Codec::kNone, Codec::kZstd}) {
    if (CodecName(c) == name) return c;
  }
  return Status::InvalidArgument("codec '" + std::string(name) + "': expected none or zstd");
}

std::string_view ShuffleName(Shuffle shuffle) {
  switch (shuffle) {
    case Shuffle::kAuto: return "auto";
    case Shuffle::kOn: return "on";
    case Shuffle::kOff: return "off";
  }
  return "unknown";
}

Result<Shuffle> ParseShuffle(std::string_view name) {
  for (Shuffle s : {Shuffle::kAuto, Shuffle::kOn, Shuffle::kOff}) {
    if (ShuffleName(s) == name) return s;
  }
  return Status::InvalidArgument("shuffle '" + std::string(name) + "': expected auto, on or off");
}

}  // namespace rckpt
