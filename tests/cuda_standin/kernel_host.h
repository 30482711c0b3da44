// The un-shuffle kernels (cuda/unshuffle_kernels.cuh) compiled for the host
// with shims for the CUDA built-ins: one host thread per CUDA thread of a
// block, the grid's blocks one after another, __syncthreads as a barrier of
// the block's threads and __shared__ memory shared by them. Slow, exact:
// what the kernel test compares with the CPU un-shuffle, and what the
// stand-in driver runs for cuLaunchKernel.
#ifndef RCKPT_TESTS_CUDA_STANDIN_KERNEL_HOST_H_
#define RCKPT_TESTS_CUDA_STANDIN_KERNEL_HOST_H_

#include <cstdint>
#include <string_view>

namespace rckpt::cuda::host {

// Runs kernel `name` over `blocks` blocks of `threads` threads with the
// kernels' arguments. False for an unknown name. Launches are serialised.
bool RunUnshuffleKernel(std::string_view name, uint32_t blocks, uint32_t threads, uint8_t* dst,
                        const uint8_t* src, uint64_t n_elem, uint32_t elem);

}  // namespace rckpt::cuda::host

#endif  // RCKPT_TESTS_CUDA_STANDIN_KERNEL_HOST_H_
