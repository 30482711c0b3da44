// Fuzz target: PyTorch import over bytes (zip directory, pickle, storages,
// tensor views, RNG detection). Traps on a code other than Corruption /
// Unsupported or a multi-line message.
#include "reader_fuzz_check.h"
#include "rckpt/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rckpt::ImportOptions o;
  o.require_crc32 = (size % 2) == 1;  // both CRC policies
  rckpt::fuzz::CheckOutcome(
      rckpt::ImportPyTorchFromBytes(rckpt::fuzz::AsBytes(data, size), o).status());
  return 0;
}
