// The structure of a .rckpt file as plain values (inspect.h): what
// `rckpt inspect` and `rckpt verify` report, without rendering it.
#include "rckpt/inspect.h"

#include "format/file_reader.h"
#include "rckpt/file.h"

namespace rckpt {
namespace {

std::string CodecSummary(const std::vector<ChunkMeta>& chunks) {
  if (chunks.empty()) return "none";
  auto one = [](const ChunkMeta& c) {
    std::string s(CodecName(c.codec));
    if (c.shuffle_elem) s += "+shuffle";
    return s;
  };
  std::string first = one(chunks[0]);
  for (const auto& c : chunks) {
    if (one(c) != first) return "mixed";
  }
  return first;
}

std::vector<InspectShard> InspectShards(const TensorMeta& t) {
  std::vector<InspectShard> out;
  for (const ShardMeta& s : t.shards) {
    InspectShard is{s.rank, s.origin, s.offsets, s.sizes, s.nbytes, 0, s.num_chunks};
    for (size_t c = s.first_chunk; c < s.first_chunk + s.num_chunks; ++c) {
      is.stored_nbytes += t.chunks[c].stored_size;
    }
    out.push_back(std::move(is));
  }
  return out;
}

}  // namespace

Result<InspectReport> InspectRckpt(const std::string& path, FileSystem* fs) {
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(fs ? *fs : DefaultFileSystem(), path));
  const Manifest& m = reader->manifest();
  InspectReport r;
  r.path = path;
  r.format = "rckpt";
  r.format_version = std::to_string(m.version_major) + "." + std::to_string(m.version_minor);
  r.writer = m.writer;
  r.created_unix_ms = m.created_unix_ms;
  r.file_size = m.file_size;
  r.metadata = m.metadata;
  r.sections = m.sections;
  for (const auto& t : m.tensors) {
    InspectTensor it{TensorInfo(t), t.nbytes, 0, CodecSummary(t.chunks), t.chunks.size(), {}};
    for (const auto& c : t.chunks) it.stored_nbytes += c.stored_size;
    it.shards = InspectShards(t);
    r.tensors.push_back(std::move(it));
  }
  for (const auto& g : m.rng) r.rng.push_back({g.name, g.kind, g.origin, g.bytes.size()});
  r.tree = m.tree;
  return r;
}

InspectReport InspectCheckpoint(const Checkpoint& ck, std::string path, std::string format) {
  InspectReport r;
  r.path = std::move(path);
  r.format = std::move(format);
  r.metadata = ck.Metadata();
  r.sections = ck.sections();
  for (const auto& t : ck.tensors()) {
    const TensorInfo info{t.name, t.section, t.role, t.tensor.dtype(), t.tensor.shape(), t.Origin()};
    r.tensors.push_back({info, t.tensor.nbytes(), t.tensor.nbytes(), "none", 0, {}});
  }
  for (const auto& g : ck.rng()) r.rng.push_back({g.name, g.kind, g.origin, g.bytes.size()});
  r.tree = ck.Tree();
  return r;
}

Status VerifyRckpt(const std::string& path, VerifyReport* report, const ProgressCallback& progress,
                   FileSystem* fs) {
  RCKPT_ASSIGN_OR_RETURN(auto reader, FileReader::Open(fs ? *fs : DefaultFileSystem(), path));
  RCKPT_RETURN_IF_ERROR(reader->VerifyAll(progress));
  if (report) {
    const Manifest& m = reader->manifest();
    *report = VerifyReport{};
    report->tensors = m.tensors.size();
    report->rng_records = m.rng.size();
    for (const auto& t : m.tensors) {
      report->chunks += t.chunks.size();
      report->raw_bytes += t.nbytes;
      for (const auto& c : t.chunks) report->stored_bytes += c.stored_size;
    }
  }
  return Status::Ok();
}

}  // namespace rckpt
