// Fuzz target: the .rckpt footer and manifest decoder (FileReader::Open on an
// in-memory file: header, footer, manifest checksum, FlatBuffers verifier,
// semantic validator). Traps on a code other than Corruption / Unsupported,
// a multi-line message, or an opened manifest that breaks the validator's
// promises (chunks inside the data region, covering each tensor exactly).
#include <vector>

#include "format/file_reader.h"
#include "reader_fuzz_check.h"
#include "rckpt/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rckpt;
  MemFileSystem fs;
  const auto bytes = fuzz::AsBytes(data, size);
  fs.SetFile("/f.rckpt", std::vector<std::byte>(bytes.begin(), bytes.end()));
  Result<std::unique_ptr<FileReader>> r = FileReader::Open(fs, "/f.rckpt");
  if (!r.ok()) {
    fuzz::CheckOutcome(r.status());
    return 0;
  }
  const Manifest& m = (*r)->manifest();
  fuzz::Check(m.data_begin <= m.data_end && m.data_end <= m.file_size && m.file_size == size);
  for (const TensorMeta& t : m.tensors) {
    uint64_t covered = 0;
    for (const ChunkMeta& c : t.chunks) {
      fuzz::Check(c.tensor_offset == covered);
      fuzz::Check(c.offset >= m.data_begin && c.offset <= m.data_end &&
                  c.stored_size <= m.data_end - c.offset);
      covered += c.raw_size;
    }
    fuzz::Check(covered == t.nbytes);
  }
  return 0;
}
