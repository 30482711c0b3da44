// Fuzz target: the .rckpt footer and manifest decoder (FileReader::Open on an
// in-memory file: header, footer, manifest checksum, FlatBuffers verifier,
// semantic validator). Traps on a code other than Corruption / Unsupported,
// a multi-line message, or an opened manifest that breaks the validator's
// promises (chunks inside the data region, covering each tensor, or each
// shard of a sharded tensor, exactly; shard blocks inside the global shape).
#include <vector>

#include "format/file_reader.h"
#include "reader_fuzz_check.h"
#include "io/mem_file.h"
#include "rckpt/file.h"

namespace {

// Chunks [first, first + count) of `t` cover `nbytes` in order.
void CheckCoverage(const rckpt::Manifest& m, const rckpt::TensorMeta& t, size_t first,
                   size_t count, uint64_t nbytes) {
  using rckpt::fuzz::Check;
  uint64_t covered = 0;
  Check(first <= t.chunks.size() && count <= t.chunks.size() - first);
  for (size_t i = first; i < first + count; ++i) {
    const rckpt::ChunkMeta& c = t.chunks[i];
    Check(c.tensor_offset == covered);
    Check(c.offset >= m.data_begin && c.offset <= m.data_end &&
          c.stored_size <= m.data_end - c.offset);
    covered += c.raw_size;
  }
  Check(covered == nbytes);
}

void CheckShards(const rckpt::Manifest& m, const rckpt::TensorMeta& t) {
  using rckpt::fuzz::Check;
  uint64_t total = 0;
  size_t next = 0;
  for (const rckpt::ShardMeta& s : t.shards) {
    Check(s.offsets.size() == t.shape.size() && s.sizes.size() == t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) {
      Check(s.offsets[d] >= 0 && s.sizes[d] >= 1 && s.offsets[d] + s.sizes[d] <= t.shape[d]);
    }
    Check(s.first_chunk == next);
    CheckCoverage(m, t, s.first_chunk, s.num_chunks, s.nbytes);
    next += s.num_chunks;
    total += s.nbytes;
  }
  Check(next == t.chunks.size() && total == t.nbytes);
}

}  // namespace

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
    if (t.sharded()) {
      CheckShards(m, t);
    } else {
      CheckCoverage(m, t, 0, t.chunks.size(), t.nbytes);
    }
  }
  return 0;
}
