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
#include <string_view>
#include <vector>

#include "rckpt/status.h"

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

// numpy: a u32 layout tag, then the state of one NumPy generator, every
// field little-endian (schema/FORMAT.md section 7, "Layouts of the python and
// numpy kinds"). Each layout lists its fields in byte order together with
// where NumPy's API holds them, so that the PyTorch importer (which reads
// them out of a pickle), the exporter (which writes that pickle back) and
// the Python package (capture_rng, restore_rng) share one definition:
//   legacy: RandomState.get_state()'s tuple ('MT19937', key, pos, has_gauss,
//           cached_gaussian); a field's path is its index in the tuple;
//   others: a bit generator's .state dict {'bit_generator': name, ...}; a
//           path is the dotted key path below the dict ("state.key").
enum class NumpyFieldType : uint8_t { kU32, kU64, kU128, kF64 };

struct NumpyRngField {
  std::string_view path;
  NumpyFieldType type;
  // 1: a Python int (float for kF64); more: an ndarray of that many
  // elements of dtype uint32 (kU32) or uint64 (kU64).
  uint32_t count;
  uint32_t offset;  // in the record (the tag is at 0)
  // The largest value NumPy gives the field (0: any the type holds): a
  // position in the 624-word key, a flag, a position in Philox's buffer.
  uint32_t max;
};

struct NumpyRngLayout {
  uint32_t tag;
  std::string_view bit_generator;  // "MT19937" for the legacy layout too
  bool legacy;                     // get_state()'s tuple, not a .state dict
  uint32_t bytes;                  // the whole record, tag included
  std::span<const NumpyRngField> fields;
};

// The layouts of tags 1 (legacy RandomState) to 6, in tag order.
std::span<const NumpyRngLayout> NumpyRngLayouts();
// The layout a record's tag names; nullptr for an unknown tag or fewer than
// 4 bytes.
const NumpyRngLayout* FindNumpyRngLayout(std::span<const std::byte> bytes);
// Checks a numpy record: a known tag, that layout's size, every field in
// its range. Corruption naming the field, the expected and the actual value.
Status ValidateNumpyRng(std::span<const std::byte> bytes);

}  // namespace rckpt

#endif  // RCKPT_SRC_CORE_RNG_LAYOUT_H_
