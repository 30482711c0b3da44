#include "kernel_image.h"

#include <algorithm>
#include <string>

#include "driver.h"
#include "rckpt/runtime.h"
#include "unshuffle_params.h"

namespace rckpt::cuda {

// Defined in the source CMake generates from the image and its stamp.
extern const unsigned char kUnshuffleImageBytes[];
extern const size_t kUnshuffleImageSize;
extern const char kUnshuffleImageStamp[];

std::span<const std::byte> UnshuffleKernelImage() {
  return {reinterpret_cast<const std::byte*>(kUnshuffleImageBytes), kUnshuffleImageSize};
}

namespace {

std::string StampField(std::string_view key) {
  std::string_view s = kUnshuffleImageStamp;
  while (!s.empty()) {
    const size_t end = s.find('\n');
    std::string_view line = s.substr(0, end);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return std::string(line.substr(key.size() + 1));
    }
    if (end == std::string_view::npos) break;
    s.remove_prefix(end + 1);
  }
  return std::string("?");
}

}  // namespace

std::string UnshuffleKernelSummary() {
  return "cubins " + StampField("cubins") + ", PTX " + StampField("ptx") + " (CUDA " +
         StampField("cuda") + ")";
}

std::string UnshuffleKernelMinDriverWhy() {
  const std::string cuda = StampField("cuda");
  return "its cubins are made by CUDA " + cuda + "'s compiler, and a CUDA " +
         cuda.substr(0, cuda.find('.')) + " toolkit's cubins load on every driver of CUDA " +
         VersionText(kMinKernelDriverVersion) + " (" + kMinKernelDriverBranch +
         ") or newer; below it byte-shuffled data is un-shuffled on the host";
}

UnshuffleLaunch PlanUnshuffle(uint64_t bytes, uint32_t elem) {
  UnshuffleLaunch l;
  if (elem < 2) return l;
  l.n_elem = bytes / elem;
  l.body_bytes = l.n_elem * elem;
  if (l.n_elem == 0) return l;
  l.kernel = elem <= kMaxTiledElem ? kUnshuffleTiledKernel : kUnshuffleGenericKernel;
  // Enough blocks to fill the GPU; the grid-stride loops cover the rest.
  const uint64_t tiles = (l.n_elem + kUnshuffleTile - 1) / kUnshuffleTile;
  l.blocks = static_cast<uint32_t>(std::min<uint64_t>(tiles, kMaxUnshuffleBlocks));
  return l;
}

}  // namespace rckpt::cuda
