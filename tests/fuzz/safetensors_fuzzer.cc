// Fuzz target: safetensors import over bytes (header length, JSON header,
// offsets, dtypes and shapes, rckpt.* metadata). Traps on a code other than
// Corruption / Unsupported or a multi-line message.
#include "reader_fuzz_check.h"
#include "rckpt/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rckpt::fuzz::CheckOutcome(
      rckpt::ImportSafetensorsFromBytes(rckpt::fuzz::AsBytes(data, size)).status());
  return 0;
}
