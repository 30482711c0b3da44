// Run-time selected XXH3 kernels (see xxh3_avx2.cc).
#ifndef RCKPT_SRC_CODEC_XXH3_AVX2_H_
#define RCKPT_SRC_CODEC_XXH3_AVX2_H_

#include <cstddef>
#include <cstdint>

namespace rckpt::internal {

// XXH3-64, seed 0. Only call when the CPU supports AVX2.
uint64_t Xxh3Avx2(const void* data, size_t size);

// Streaming XXH3-64 state of the AVX2 build (null when out of memory).
void* Xxh3Avx2NewState();
void Xxh3Avx2FreeState(void* state);
void Xxh3Avx2Update(void* state, const void* data, size_t size);
uint64_t Xxh3Avx2Digest(const void* state);

}  // namespace rckpt::internal

#endif  // RCKPT_SRC_CODEC_XXH3_AVX2_H_
