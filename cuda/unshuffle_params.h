// The un-shuffle kernels' launch shape, shared by the kernels
// (unshuffle_kernels.cuh) and the host code that launches them.
#ifndef RCKPT_CUDA_UNSHUFFLE_PARAMS_H_
#define RCKPT_CUDA_UNSHUFFLE_PARAMS_H_

#include <cstdint>

namespace rckpt::cuda {

// Threads per block.
inline constexpr uint32_t kUnshuffleThreads = 256;
// Elements per tile: a block reads kUnshuffleTile bytes of each of the
// `elem` byte planes (coalesced) into shared memory and writes kUnshuffleTile
// whole elements back out (coalesced), so neither side of the transpose is
// strided in global memory.
inline constexpr uint32_t kUnshuffleTile = 1024;
// The tiled kernel's shared memory holds kUnshuffleTile elements of at most
// this many bytes; larger elements use the generic kernel.
inline constexpr uint32_t kMaxTiledElem = 16;
// Grid-stride loops cover any size with at most this many blocks.
inline constexpr uint32_t kMaxUnshuffleBlocks = 65535;

// The kernels' symbols in the image (extern "C": no mangling).
inline constexpr const char* kUnshuffleTiledKernel = "rckpt_unshuffle_tiled";
inline constexpr const char* kUnshuffleGenericKernel = "rckpt_unshuffle_generic";

}  // namespace rckpt::cuda

#endif  // RCKPT_CUDA_UNSHUFFLE_PARAMS_H_
