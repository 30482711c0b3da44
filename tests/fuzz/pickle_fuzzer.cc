// Fuzz target: the restricted unpickler on arbitrary bytes (default limits,
// non-strict). Traps on a code other than Corruption / Unsupported or a
// multi-line message; ASan/UBSan catch the rest.
#include "convert/pickle_reader.h"
#include "reader_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rckpt::fuzz::CheckOutcome(rckpt::convert::FuzzUnpickle(rckpt::fuzz::AsBytes(data, size)));
  return 0;
}
