// Fuzz target: the whole open-and-load path on an in-memory .rckpt file
// (rckpt::Load to host, read and with map_file, checksums verified, chunks
// decoded on two workers) and VerifyAll. Traps on a code other than Corruption / Unsupported, on a
// multi-line message, or when Load and VerifyAll disagree (loads do not read the padding, so a
// file whose only fault is non-zero padding loads and fails verification).
#include <vector>

#include "format/file_reader.h"
#include "format/padding.h"
#include "reader_fuzz_check.h"
#include "io/mem_file.h"
#include "rckpt/file.h"
#include "rckpt/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rckpt;
  MemFileSystem fs;
  const auto bytes = fuzz::AsBytes(data, size);
  fs.SetFile("/f.rckpt", std::vector<std::byte>(bytes.begin(), bytes.end()));
  {
    // What the file claims is bounded by its size times zstd's largest
    // expansion; keep inputs that claim more than 256 MiB out of the
    // fuzzer's memory budget.
    Result<std::unique_ptr<FileReader>> r = FileReader::Open(fs, "/f.rckpt");
    if (!r.ok()) {
      fuzz::CheckOutcome(r.status());
      return 0;
    }
    uint64_t total = 0;
    for (const auto& t : (*r)->manifest().tensors) total += t.nbytes;
    if (total > (256u << 20)) return 0;
    const Status verified = (*r)->VerifyAll();
    fuzz::CheckOutcome(verified);
    const Status padding = VerifyZeroPadding((*r)->file(), (*r)->manifest(), "/f.rckpt");
    fuzz::CheckOutcome(padding);
    if (!padding.ok()) fuzz::Check(!verified.ok());
    LoadOptions o;
    o.fs = &fs;
    o.threads = 2;
    o.map_location = MapLocation::To(Device::Cpu());  // files may name absent GPUs
    // Read, then mapped (the in-memory file maps to a private copy, which
    // runs the mapped path: aliased raw tensors, chunks decoded in place).
    for (bool mapped : {false, true}) {
      o.map_file = mapped;
      Result<Checkpoint> ck = Load("/f.rckpt", o);
      fuzz::CheckOutcome(ck.status());
      if (padding.ok()) fuzz::Check(ck.ok() == verified.ok());
    }
  }
  return 0;
}
