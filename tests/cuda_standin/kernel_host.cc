#include "kernel_host.h"

#include <barrier>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "unshuffle_params.h"

namespace rckpt::cuda::host {
namespace {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// The built-ins, per host thread.
thread_local Dim3 threadIdx;
thread_local Dim3 blockIdx;
thread_local Dim3 blockDim;
thread_local Dim3 gridDim;
thread_local std::barrier<>* block_barrier = nullptr;

void __syncthreads() { block_barrier->arrive_and_wait(); }

// What nvcc would see; `__shared__` arrays become one array per kernel,
// shared by the threads of the one block that runs at a time.
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static

}  // namespace
}  // namespace rckpt::cuda::host

// The kernels, unchanged, in the shim's namespace (their extern "C" names
// stay those of the image; this object never exports them).
namespace rckpt::cuda::host {
namespace {
#include "unshuffle_kernels.cuh"
}  // namespace
}  // namespace rckpt::cuda::host

namespace rckpt::cuda::host {

bool RunUnshuffleKernel(std::string_view name, uint32_t blocks, uint32_t threads, uint8_t* dst,
                        const uint8_t* src, uint64_t n_elem, uint32_t elem) {
  void (*kernel)(uint8_t*, const uint8_t*, uint64_t, uint32_t) = nullptr;
  if (name == kUnshuffleTiledKernel) kernel = rckpt_unshuffle_tiled;
  if (name == kUnshuffleGenericKernel) kernel = rckpt_unshuffle_generic;
  if (kernel == nullptr) return false;
  static std::mutex one_launch_at_a_time;
  std::lock_guard<std::mutex> lock(one_launch_at_a_time);
  std::barrier<> barrier(threads);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      blockDim = {threads, 1, 1};
      gridDim = {blocks, 1, 1};
      block_barrier = &barrier;
      for (uint32_t b = 0; b < blocks; ++b) {
        blockIdx = {b, 0, 0};
        kernel(dst, src, n_elem, elem);
        barrier.arrive_and_wait();  // the block ends before the next begins
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return true;
}

}  // namespace rckpt::cuda::host
