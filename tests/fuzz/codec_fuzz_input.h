// The input layout of the codec fuzz target, shared with its corpus
// generator: [elem: u8][dst size: u24 little-endian, at most 1 MiB][frame].
#ifndef RCKPT_TESTS_FUZZ_CODEC_FUZZ_INPUT_H_
#define RCKPT_TESTS_FUZZ_CODEC_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>

namespace rckpt::fuzz {

inline constexpr size_t kCodecHeaderBytes = 4;
// Destination sizes are masked to 20 bits: big enough for multi-block
// frames, small enough that every input runs in milliseconds.
inline constexpr uint32_t kCodecMaxDst = (1u << 20) - 1;
// Element sizes 0..17: 0 and 1 are plain copies, 2..17 cover the vector
// kernels (2, 4, 8, 16) and the scalar loop.
inline constexpr uint32_t kCodecElemModulus = 18;

}  // namespace rckpt::fuzz

#endif  // RCKPT_TESTS_FUZZ_CODEC_FUZZ_INPUT_H_
