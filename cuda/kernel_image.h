// The un-shuffle kernels as every build ships them: the image made by
// scripts/make-kernel-image.sh (cuda/unshuffle_kernels.fatbin, embedded at
// build time) and how a launch is shaped.
#ifndef RCKPT_CUDA_KERNEL_IMAGE_H_
#define RCKPT_CUDA_KERNEL_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace rckpt::cuda {

// The fatbin: cubins and PTX, loadable by cuModuleLoadData.
std::span<const std::byte> UnshuffleKernelImage();
// "cubins sm_75 ... sm_120, PTX compute_75 (CUDA 12.9)", from its stamp
// (cuda/unshuffle_kernels.fatbin.txt: source hash, toolkit version, the
// packages that made it, cubin architectures and PTX, one "key value" per
// line).
std::string UnshuffleKernelSummary();
// Why the image needs kMinKernelDriverVersion: the toolkit that made it.
std::string UnshuffleKernelMinDriverWhy();

// One un-shuffle of `bytes` bytes with element size `elem` (>= 2): which
// kernel, how many blocks of kUnshuffleThreads threads, and how much of the
// input the kernel covers; the rest (bytes - body_bytes, a trailing partial
// element) is copied as it is.
struct UnshuffleLaunch {
  const char* kernel = nullptr;  // nullptr when there is no whole element
  uint32_t blocks = 0;
  uint64_t n_elem = 0;
  uint64_t body_bytes = 0;
};
UnshuffleLaunch PlanUnshuffle(uint64_t bytes, uint32_t elem);

}  // namespace rckpt::cuda

#endif  // RCKPT_CUDA_KERNEL_IMAGE_H_
