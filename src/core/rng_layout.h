// The byte layouts of RNG records whose kinds the library checks or
// converts (schema/FORMAT.md section 7), one definition each. The checks
// (rng.cc, mt_state.cc), the PyTorch importer and exporter (convert/) and
// the Python extension (python/src/) all read them from here.
#ifndef RCKPT_SRC_CORE_RNG_LAYOUT_H_
#define RCKPT_SRC_CORE_RNG_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rckpt {

// torch_cpu: torch.get_rng_state(), a memcpy of CPUGeneratorImplState (LP64,
// little-endian). The fields named are those torch's set_state checks.
inline constexpr size_t kTorchCpuStateBytes = 5056;
inline constexpr size_t kTorchCpuLeftOffset = 8;     // i32, 1..624
inline constexpr size_t kTorchCpuSeededOffset = 12;  // i32, must be 1
inline constexpr size_t kTorchCpuNextOffset = 16;    // u64, <= 624
inline constexpr int64_t kMersenneStateWords = 624;  // mt19937's state size

// torch_cuda: torch.cuda.get_rng_state(): u64 seed, i64 philox offset.
inline constexpr size_t kTorchCudaStateBytes = 16;

// mt19937 / mt19937_64 binary layout (mt_state.h): magic "MT32" or "MT64",
// u32 index, then the state words; 2504 bytes for either engine.
inline constexpr size_t kMtMagicBytes = 4;
inline constexpr size_t kMtIndexOffset = 4;
inline constexpr size_t kMtWordsOffset = 8;
inline constexpr size_t kMtStateBytes = kMtWordsOffset + 624 * 4;

// python: random.getstate(), the tuple (3, (624 MT words + index),
// None | gauss) as u32 version (3), 625 x u32, u32 has_gauss, f64 gauss,
// all little-endian: 2516 bytes.
inline constexpr size_t kPythonRngBytes = 2516;
std::string EncodePythonRng(const std::vector<uint32_t>& words625, bool has_gauss,
                            double gauss);
// False unless `bytes` is that layout (size, version 3, has_gauss 0 or 1).
bool DecodePythonRng(std::span<const std::byte> bytes, std::vector<uint32_t>* words625,
                     bool* has_gauss, double* gauss);

}  // namespace rckpt

#endif  // RCKPT_SRC_CORE_RNG_LAYOUT_H_
