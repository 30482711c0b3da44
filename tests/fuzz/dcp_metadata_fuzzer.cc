// Fuzz target: a DCP .metadata pickle through the allow-list unpickler and
// the metadata parser (default limits). Traps on a code other than
// Corruption / Unsupported or a multi-line message; ASan/UBSan catch the rest.
#include "convert/dcp_import.h"
#include "reader_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rckpt::fuzz::CheckOutcome(
      rckpt::convert::ParseDcpMetadata(rckpt::fuzz::AsBytes(data, size), rckpt::PickleLimits{})
          .status());
  return 0;
}
