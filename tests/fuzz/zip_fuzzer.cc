// Fuzz target: the zip directory reader on arbitrary bytes. Traps on a code
// other than Corruption / Unsupported, a multi-line message, or a directory
// whose entries are not inside the input or are listed twice.
#include <set>
#include <string>

#include "convert/zip.h"
#include "reader_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rckpt;
  Result<convert::ZipDirectory> dir = convert::ReadZipDirectoryFromBytes(fuzz::AsBytes(data, size));
  if (!dir.ok()) {
    fuzz::CheckOutcome(dir.status());
    return 0;
  }
  std::set<std::string> names;
  for (const auto& e : dir->entries) {
    fuzz::Check(names.insert(e.name).second);
    fuzz::Check(e.data_offset <= size && e.size <= size - e.data_offset);
  }
  return 0;
}
