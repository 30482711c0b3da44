#include "format/manifest.h"

#include "util/utf8.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "format/layout.h"
#include "core/shard_geometry.h"
#include "rckpt/checkpoint_generated.h"

namespace rckpt {
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameBytes) {
    return "is " + std::to_string(name.size()) + " bytes, the limit is " +
           std::to_string(kMaxNameBytes);
  }
  if (!IsValidUtf8(name)) return "is not valid UTF-8";
  return "";
}

namespace {

namespace fb = ::rckpt::fb;

uint8_t DeviceTypeByte(Device d) { return static_cast<uint8_t>(d.type); }

}  // namespace

Device LowestRankOrigin(const std::vector<ShardMeta>& shards) {
  const ShardMeta* lowest = nullptr;
  for (const ShardMeta& s : shards) {
    if (lowest == nullptr || s.rank < lowest->rank) lowest = &s;
  }
  return lowest ? lowest->origin : Device::Cpu();
}

uint32_t FormatMinorFor(const std::vector<TensorMeta>& tensors) {
  for (const TensorMeta& t : tensors) {
    if (t.sharded()) return kFormatMinorSharded;
  }
  return 0;
}

std::vector<uint8_t> BuildManifest(const ManifestInput& in) {
  Manifest m;
  m.alignment = in.alignment;
  m.data_begin = in.data_begin;
  m.data_end = in.data_end;
  m.writer = in.writer;
  m.created_unix_ms = in.created_unix_ms;
  m.metadata = in.ck.Metadata();
  m.sections = in.ck.sections();
  m.rng = in.ck.rng();
  // first_chunk is per source: every tensor, then every shard (writer.h).
  size_t source = 0;
  auto take_chunks = [&](std::vector<ChunkMeta>* out) {
    const uint64_t first = in.first_chunk[source];
    const uint64_t end =
        source + 1 < in.first_chunk.size() ? in.first_chunk[source + 1] : in.chunks.size();
    ++source;
    out->insert(out->end(), in.chunks.begin() + first, in.chunks.begin() + end);
    return end - first;
  };
  for (const TensorEntry& e : in.ck.tensors()) {
    TensorMeta& tm = m.tensors.emplace_back();
    tm.name = e.name;
    tm.section = e.section;
    tm.role = e.role;
    tm.dtype = e.tensor.dtype();
    tm.shape = e.tensor.shape();
    tm.origin = e.Origin();
    tm.nbytes = e.tensor.nbytes();
    take_chunks(&tm.chunks);
  }
  for (const ShardedTensorEntry& e : in.ck.sharded_tensors()) {
    TensorMeta& tm = m.tensors.emplace_back();
    tm.name = e.name;
    tm.section = e.section;
    tm.role = e.role;
    tm.dtype = e.dtype;
    tm.shape = e.shape;
    Result<uint64_t> nbytes = ShapeBytes(e.shape, e.dtype);  // checked by AddShardedTensor
    tm.nbytes = nbytes.ok() ? *nbytes : 0;
    for (const TensorShard& s : e.shards) {
      ShardMeta& sm = tm.shards.emplace_back();
      sm.rank = s.rank;
      sm.origin = s.Origin();
      sm.offsets = s.offsets;
      sm.sizes = s.block.shape();
      sm.nbytes = s.block.nbytes();
      sm.first_chunk = tm.chunks.size();
      sm.num_chunks = take_chunks(&tm.chunks);
    }
    tm.origin = LowestRankOrigin(tm.shards);
  }
  return BuildManifestFromMeta(m, in.tree);
}

std::vector<uint8_t> BuildManifestFromMeta(const Manifest& m, const FlatTree& tree) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::KeyValue>> meta;
  for (const auto& [k, v] : m.metadata) {
    meta.push_back(fb::CreateKeyValue(b, b.CreateString(k), b.CreateString(v)));
  }
  std::vector<flatbuffers::Offset<fb::Section>> sections;
  std::map<std::string, uint32_t, std::less<>> section_index;
  for (const auto& s : m.sections) {
    section_index[s.name] = static_cast<uint32_t>(sections.size());
    sections.push_back(fb::CreateSection(b, b.CreateString(s.name), static_cast<uint8_t>(s.role)));
  }
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::vector<fb::Chunk> chunks;
  for (const TensorMeta& t : m.tensors) {
    const uint64_t first = chunks.size();
    for (const ChunkMeta& c : t.chunks) {
      chunks.emplace_back(c.offset, c.stored_size, c.raw_size, c.checksum,
                          static_cast<uint8_t>(c.codec), static_cast<uint8_t>(c.shuffle_elem));
    }
    // A sharded tensor owns no chunks itself: its shards do (FORMAT.md 4a).
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Shard>>> shards;
    if (t.sharded()) {
      std::vector<flatbuffers::Offset<fb::Shard>> list;
      for (const ShardMeta& s : t.shards) {
        list.push_back(fb::CreateShard(b, s.rank, DeviceTypeByte(s.origin), s.origin.index,
                                       b.CreateVector(s.offsets), b.CreateVector(s.sizes),
                                       first + s.first_chunk, s.num_chunks));
      }
      shards = b.CreateVector(list);
    }
    tensors.push_back(fb::CreateTensor(
        b, b.CreateString(t.name), section_index.at(t.section), static_cast<uint8_t>(t.role),
        static_cast<uint8_t>(t.dtype), b.CreateVector(t.shape), DeviceTypeByte(t.origin),
        t.origin.index, t.nbytes, first, t.sharded() ? 0 : t.chunks.size(), shards));
  }
  std::vector<flatbuffers::Offset<fb::Rng>> rng;
  for (const RngRecord& r : m.rng) {
    rng.push_back(fb::CreateRng(
        b, b.CreateString(r.name), static_cast<uint8_t>(r.kind), DeviceTypeByte(r.origin),
        r.origin.index,
        b.CreateVector(reinterpret_cast<const uint8_t*>(r.bytes.data()), r.bytes.size())));
  }
  std::vector<fb::Node> nodes;
  nodes.reserve(tree.nodes.size());
  for (const FlatNode& n : tree.nodes) {
    nodes.emplace_back(n.first, n.str_off, n.str_len, n.count, n.kind);
  }
  auto root = fb::CreateManifest(
      b, kFormatMajor, FormatMinorFor(m.tensors), b.CreateString(m.writer), m.created_unix_ms,
      m.alignment, m.data_begin, m.data_end, b.CreateVector(meta), b.CreateVector(sections),
      b.CreateVector(tensors), b.CreateVectorOfStructs(chunks), b.CreateVector(rng),
      b.CreateVectorOfStructs(nodes), b.CreateVector(tree.bytes));
  b.Finish(root, fb::ManifestIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

namespace {

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

Result<Device> DecodeDevice(const std::string& where, uint8_t type, int32_t index) {
  if (type == static_cast<uint8_t>(DeviceType::kCpu)) {
    if (index != 0) {
      return Status::Corruption(where + ": cpu device with index " + std::to_string(index) +
                                ", expected 0");
    }
    return Device::Cpu();
  }
  if (type == static_cast<uint8_t>(DeviceType::kCuda)) {
    if (index < 0) {
      return Status::Corruption(where + ": cuda device index " + std::to_string(index) +
                                " is negative");
    }
    return Device::Cuda(index);
  }
  return Status::Corruption(where + ": unknown device type " + std::to_string(type));
}

Status CheckName(const std::string& where, const flatbuffers::String* name) {
  const std::string problem =
      NameProblem(name == nullptr ? std::string_view() : name->string_view());
  if (!problem.empty()) return Status::Corruption(where + ": name " + problem);
  return Status::Ok();
}

Status ValidateChunk(const std::string& where, const fb::Chunk& c, const FileBounds& fb_bounds,
                     uint32_t alignment, ChunkMeta* out) {
  if (c.codec() > static_cast<uint8_t>(Codec::kZstd)) {
    return Status::Corruption(where + ": unknown codec " + std::to_string(c.codec()));
  }
  if (c.shuffle_elem() == 1 || c.shuffle_elem() > 16) {
    return Status::Corruption(where + ": shuffle element size " +
                              std::to_string(c.shuffle_elem()) + ", expected 0 or 2..16");
  }
  if (c.raw_size() == 0) return Status::Corruption(where + ": raw size is 0");
  if (c.raw_size() > kMaxChunkRawBytes) {
    return Status::Corruption(where + ": raw size " + std::to_string(c.raw_size()) +
                              " exceeds the chunk limit " + std::to_string(kMaxChunkRawBytes));
  }
  // No zstd frame expands more than this (an RLE block of 128 KiB costs 4
  // bytes), so a larger claim is a lie that would only make us allocate.
  if (c.codec() == static_cast<uint8_t>(Codec::kZstd) &&
      c.raw_size() > c.stored_size() * kMaxZstdRatio + (128u << 10)) {
    return Status::Corruption(where + ": raw size " + std::to_string(c.raw_size()) +
                              " is more than zstd can expand " + std::to_string(c.stored_size()) +
                              " stored bytes to");
  }
  if (c.codec() == static_cast<uint8_t>(Codec::kNone) && c.stored_size() != c.raw_size()) {
    return Status::Corruption(where + ": uncompressed chunk stores " +
                              std::to_string(c.stored_size()) + " bytes for raw size " +
                              std::to_string(c.raw_size()));
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(c.offset(), c.stored_size(), &end) ||
      c.offset() < fb_bounds.data_begin || end > fb_bounds.data_end) {
    return Status::Corruption(where + ": extent [" + std::to_string(c.offset()) + ", " +
                              std::to_string(c.offset()) + "+" + std::to_string(c.stored_size()) +
                              ") is outside the data region [" +
                              std::to_string(fb_bounds.data_begin) + ", " +
                              std::to_string(fb_bounds.data_end) + ")");
  }
  uint64_t need = c.stored_size() >= alignment ? alignment : kMinAlignment;
  if (c.offset() % need != 0) {
    return Status::Corruption(where + ": offset " + std::to_string(c.offset()) +
                              " is not a multiple of " + std::to_string(need));
  }
  out->offset = c.offset();
  out->stored_size = c.stored_size();
  out->raw_size = c.raw_size();
  out->checksum = c.checksum();
  out->codec = static_cast<Codec>(c.codec());
  out->shuffle_elem = c.shuffle_elem();
  return Status::Ok();
}

using ChunkVector = flatbuffers::Vector<const fb::Chunk*>;

// Validates chunks [first, first + count) of the manifest as the chunks of
// one run of `nbytes` raw bytes (a tensor, or one shard of one) and appends
// them to `out` with tensor_offset counted from the run's start.
Status ReadChunkRun(const std::string& where, const char* what, const ChunkVector* chunks,
                    uint64_t first, uint64_t count, uint64_t nbytes, const FileBounds& bounds, uint32_t alignment,
                    std::vector<ChunkMeta>* out) {
  uint64_t covered = 0;
  for (uint64_t c = 0; c < count; ++c) {
    ChunkMeta& cm = out->emplace_back();
    RCKPT_RETURN_IF_ERROR(ValidateChunk(where + ": chunk " + std::to_string(c),
                                        *chunks->Get(first + c), bounds, alignment, &cm));
    cm.tensor_offset = covered;
    if (__builtin_add_overflow(covered, cm.raw_size, &covered) || covered > nbytes) {
      return Status::Corruption(where + ": chunks decode to more than its " +
                                std::to_string(nbytes) + " bytes");
    }
  }
  if (covered != nbytes) {
    return Status::Corruption(where + ": chunks hold " + std::to_string(covered) +
                              " bytes, the " + what + " needs " + std::to_string(nbytes));
  }
  return Status::Ok();
}

// The shards of sharded tensor `t` (format 1.1): each shard's block and
// chunks, then the blocks' tiling of the global shape (core/shard_geometry.h).
Status ParseShards(const std::string& where, const fb::Tensor& t, const Manifest& m,
                   const ChunkVector* chunks, const FileBounds& bounds, ShardCoverage coverage,
                   uint64_t* next_chunk, TensorMeta* tm) {
  if (m.version_major == 1 && m.version_minor < kFormatMinorSharded) {
    return Status::Corruption(where + ": has shards, which need format 1." +
                              std::to_string(kFormatMinorSharded) + "; the file declares " +
                              std::to_string(m.version_major) + "." +
                              std::to_string(m.version_minor));
  }
  if (t.num_chunks() != 0 || t.first_chunk() != *next_chunk) {
    return Status::Corruption(where + ": a sharded tensor's own chunks are [" +
                              std::to_string(t.first_chunk()) + ", +" +
                              std::to_string(t.num_chunks()) + "), expected [" +
                              std::to_string(*next_chunk) + ", +0): its shards hold its chunks");
  }
  const uint64_t num_chunks = chunks ? chunks->size() : 0;
  for (flatbuffers::uoffset_t i = 0; i < t.shards()->size(); ++i) {
    const fb::Shard* s = t.shards()->Get(i);
    const std::string at = where + ": shard " + std::to_string(i);
    ShardMeta& sm = tm->shards.emplace_back();
    sm.rank = s->rank();
    if (sm.rank < 0) {
      return Status::Corruption(at + ": rank " + std::to_string(sm.rank) + " is negative");
    }
    RCKPT_ASSIGN_OR_RETURN(sm.origin, DecodeDevice(at, s->origin_type(), s->origin_index()));
    if (s->offsets()) sm.offsets.assign(s->offsets()->begin(), s->offsets()->end());
    if (s->sizes()) sm.sizes.assign(s->sizes()->begin(), s->sizes()->end());
    RCKPT_RETURN_IF_ERROR(CheckShardBlock(at, tm->shape, sm));
    // In bounds of a shape whose byte size fits u64, so this cannot fail.
    sm.nbytes = ShapeBytes(sm.sizes, tm->dtype).value();
    if (s->first_chunk() != *next_chunk || s->num_chunks() > num_chunks - *next_chunk) {
      return Status::Corruption(at + ": chunks [" + std::to_string(s->first_chunk()) + ", +" +
                                std::to_string(s->num_chunks()) + ") expected to start at " +
                                std::to_string(*next_chunk) + " within " +
                                std::to_string(num_chunks) + " chunks");
    }
    sm.first_chunk = tm->chunks.size();
    sm.num_chunks = s->num_chunks();
    RCKPT_RETURN_IF_ERROR(ReadChunkRun(at, "shard", chunks, *next_chunk, s->num_chunks(), sm.nbytes,
                                       bounds, m.alignment, &tm->chunks));
    *next_chunk += s->num_chunks();
  }
  if (coverage == ShardCoverage::kPart) return Status::Ok();
  std::vector<const Block*> blocks;
  for (const ShardMeta& s : tm->shards) blocks.push_back(&s);
  return CheckShardTiling(where, tm->shape, blocks);
}

// The manifest's scalar fields, each checked against the file's header and
// footer.
Status ParseFileFields(const fb::Manifest& m, const FileBounds& bounds, Manifest* out) {
  out->version_major = m.version_major();
  out->version_minor = m.version_minor();
  if (out->version_major > kFormatMajor) {
    return Status::Unsupported("manifest: format version " + std::to_string(out->version_major) +
                               "." + std::to_string(out->version_minor) +
                               " is newer than this reader; upgrade rckpt");
  }
  out->writer = Str(m.writer());
  out->created_unix_ms = m.created_unix_ms();
  out->alignment = m.alignment();
  if (out->alignment != bounds.alignment) {
    return Status::Corruption("manifest: alignment " + std::to_string(out->alignment) +
                              " differs from the header's " + std::to_string(bounds.alignment));
  }
  out->data_begin = m.data_begin();
  out->data_end = m.data_end();
  if (out->data_begin != bounds.data_begin || out->data_end != bounds.data_end) {
    return Status::Corruption("manifest: data region [" + std::to_string(out->data_begin) + ", " +
                              std::to_string(out->data_end) + ") differs from the file's [" +
                              std::to_string(bounds.data_begin) + ", " +
                              std::to_string(bounds.data_end) + ")");
  }
  return Status::Ok();
}

Status ParseMetadata(const fb::Manifest& m, Manifest* out) {
  if (!m.metadata()) return Status::Ok();
  for (flatbuffers::uoffset_t i = 0; i < m.metadata()->size(); ++i) {
    const fb::KeyValue* kv = m.metadata()->Get(i);
    std::string key = Str(kv->key());
    if (!out->metadata.emplace(key, Str(kv->value())).second) {
      return Status::Corruption("manifest: metadata key '" + key + "' appears twice");
    }
  }
  return Status::Ok();
}

Status ParseSections(const fb::Manifest& m, Manifest* out) {
  if (!m.sections()) return Status::Ok();
  std::set<std::string, std::less<>> names;
  for (flatbuffers::uoffset_t i = 0; i < m.sections()->size(); ++i) {
    const fb::Section* s = m.sections()->Get(i);
    std::string where = "section " + std::to_string(i);
    RCKPT_RETURN_IF_ERROR(CheckName(where, s->name()));
    if (!IsValidRole(s->role())) {
      return Status::Corruption(where + " '" + s->name()->str() + "': unknown role " +
                                std::to_string(s->role()));
    }
    if (!names.insert(s->name()->str()).second) {
      return Status::Corruption(where + ": section '" + s->name()->str() + "' appears twice");
    }
    out->sections.push_back(SectionInfo{s->name()->str(), static_cast<Role>(s->role())});
  }
  return Status::Ok();
}

// Tensor `i`'s header (name, section, role, dtype, shape, size, origin),
// not its chunks. `*where` becomes the tensor's name for later messages.
Status ParseTensorHeader(const fb::Tensor& t, flatbuffers::uoffset_t i, const Manifest& m,
                         std::string* where, TensorMeta* tm) {
  *where = "tensor " + std::to_string(i);
  RCKPT_RETURN_IF_ERROR(CheckName(*where, t.name()));
  tm->name = t.name()->str();
  *where = "tensor '" + tm->name + "'";
  if (t.section() >= m.sections.size()) {
    return Status::Corruption(*where + ": section index " + std::to_string(t.section()) +
                              " is out of range (" + std::to_string(m.sections.size()) +
                              " sections)");
  }
  tm->section = m.sections[t.section()].name;
  if (!IsValidRole(t.role())) {
    return Status::Corruption(*where + ": unknown role " + std::to_string(t.role()));
  }
  tm->role = static_cast<Role>(t.role());
  if (!IsValidDType(t.dtype())) {
    return Status::Corruption(*where + ": unknown dtype " + std::to_string(t.dtype()));
  }
  tm->dtype = static_cast<DType>(t.dtype());
  if (t.shape()) {
    if (t.shape()->size() > kMaxRank) {
      return Status::Corruption(*where + ": rank " + std::to_string(t.shape()->size()) +
                                " exceeds " + std::to_string(kMaxRank));
    }
    tm->shape.assign(t.shape()->begin(), t.shape()->end());
  }
  auto nbytes = ShapeBytes(tm->shape, tm->dtype);
  if (!nbytes.ok()) return Status::Corruption(*where + ": " + nbytes.status().message());
  if (*nbytes != t.nbytes()) {
    return Status::Corruption(*where + ": nbytes is " + std::to_string(t.nbytes()) + ", shape " +
                              ShapeToString(tm->shape) + " of " +
                              std::string(DTypeName(tm->dtype)) + " needs " +
                              std::to_string(*nbytes));
  }
  tm->nbytes = *nbytes;
  RCKPT_ASSIGN_OR_RETURN(tm->origin, DecodeDevice(*where, t.origin_type(), t.origin_index()));
  return Status::Ok();
}

// Every tensor, with its chunks (or its shards' chunks), which must take the
// manifest's chunks in order, each exactly once; then the names' uniqueness.
Status ParseTensors(const fb::Manifest& m, const FileBounds& bounds, ShardCoverage coverage,
                    Manifest* out) {
  // Tensor names are checked for duplicates after the loop, by sorting views
  // of them: a set of copies cost an allocation and a node per tensor, which
  // showed in the per-tensor cost of a load (docs/PERFORMANCE.md).
  std::vector<std::string_view> tensor_names;
  const auto* chunks = m.chunks();
  const uint64_t num_chunks = chunks ? chunks->size() : 0;
  uint64_t next_chunk = 0;
  if (m.tensors()) {
    out->tensors.reserve(m.tensors()->size());
    tensor_names.reserve(m.tensors()->size());
    for (flatbuffers::uoffset_t i = 0; i < m.tensors()->size(); ++i) {
      const fb::Tensor* t = m.tensors()->Get(i);
      std::string where;
      TensorMeta tm;
      RCKPT_RETURN_IF_ERROR(ParseTensorHeader(*t, i, *out, &where, &tm));
      tensor_names.push_back(t->name()->string_view());
      if (t->shards() != nullptr && t->shards()->size() > 0) {
        RCKPT_RETURN_IF_ERROR(
            ParseShards(where, *t, *out, chunks, bounds, coverage, &next_chunk, &tm));
        out->tensors.push_back(std::move(tm));
        continue;
      }
      if (t->first_chunk() != next_chunk || t->num_chunks() > num_chunks - next_chunk) {
        return Status::Corruption(where + ": chunks [" + std::to_string(t->first_chunk()) + ", +" +
                                  std::to_string(t->num_chunks()) + ") expected to start at " +
                                  std::to_string(next_chunk) + " within " +
                                  std::to_string(num_chunks) + " chunks");
      }
      RCKPT_RETURN_IF_ERROR(ReadChunkRun(where, "tensor", chunks, next_chunk, t->num_chunks(),
                                         tm.nbytes, bounds, out->alignment, &tm.chunks));
      next_chunk += t->num_chunks();
      out->tensors.push_back(std::move(tm));
    }
  }
  std::sort(tensor_names.begin(), tensor_names.end());
  if (auto twice = std::adjacent_find(tensor_names.begin(), tensor_names.end());
      twice != tensor_names.end()) {
    return Status::Corruption("tensor '" + std::string(*twice) + "': name appears twice");
  }
  if (next_chunk != num_chunks) {
    return Status::Corruption("manifest: " + std::to_string(num_chunks - next_chunk) +
                              " chunks belong to no tensor");
  }
  return Status::Ok();
}

// Chunk extents must not overlap: sorted by offset, neighbours compared.
Status CheckExtentsDisjoint(const Manifest& m) {
  size_t count = 0;
  for (const auto& t : m.tensors) count += t.chunks.size();
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  extents.reserve(count);
  for (const auto& t : m.tensors) {
    for (const auto& c : t.chunks) extents.emplace_back(c.offset, c.stored_size);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i - 1].first + extents[i - 1].second > extents[i].first) {
      return Status::Corruption("manifest: chunk extents [" + std::to_string(extents[i - 1].first) +
                                ", +" + std::to_string(extents[i - 1].second) + ") and [" +
                                std::to_string(extents[i].first) + ", +" +
                                std::to_string(extents[i].second) + ") overlap");
    }
  }
  return Status::Ok();
}

Status ParseRng(const fb::Manifest& m, Manifest* out) {
  if (!m.rng()) return Status::Ok();
  std::set<std::string, std::less<>> names;
  for (flatbuffers::uoffset_t i = 0; i < m.rng()->size(); ++i) {
    const fb::Rng* r = m.rng()->Get(i);
    std::string where = "RNG record " + std::to_string(i);
    RCKPT_RETURN_IF_ERROR(CheckName(where, r->name()));
    RngRecord rec;
    rec.name = r->name()->str();
    where = "RNG record '" + rec.name + "'";
    if (!names.insert(rec.name).second) return Status::Corruption(where + ": name appears twice");
    if (!IsValidRngKind(r->kind())) {
      return Status::Corruption(where + ": unknown kind " + std::to_string(r->kind()));
    }
    rec.kind = static_cast<RngKind>(r->kind());
    RCKPT_ASSIGN_OR_RETURN(rec.origin, DecodeDevice(where, r->origin_type(), r->origin_index()));
    if (r->state()) {
      const auto* p = reinterpret_cast<const std::byte*>(r->state()->data());
      rec.bytes.assign(p, p + r->state()->size());
    }
    Status v = ValidateRngState(rec.kind, rec.bytes);
    if (!v.ok()) return Status::Corruption(where + ": " + v.message());
    out->rng.push_back(std::move(rec));
  }
  return Status::Ok();
}

Result<Value> ParseTree(const fb::Manifest& m) {
  std::vector<FlatNode> nodes;
  if (m.tree_nodes()) {
    nodes.reserve(m.tree_nodes()->size());
    for (const fb::Node* n : *m.tree_nodes()) {
      nodes.push_back(FlatNode{n->first(), n->str_off(), n->str_len(), n->count(), n->kind()});
    }
  }
  std::span<const uint8_t> tree_bytes;
  if (m.tree_bytes()) tree_bytes = {m.tree_bytes()->data(), m.tree_bytes()->size()};
  return DecodeTree(nodes, tree_bytes);
}

}  // namespace

// The mirror of BuildManifestFromMeta, section by section, each validated
// before the next is read.
Result<Manifest> ParseManifest(std::span<const uint8_t> bytes, const FileBounds& bounds,
                               ShardCoverage coverage) {
  if (bytes.size() > kMaxManifestBytes) {
    return Status::Corruption("manifest: " + std::to_string(bytes.size()) +
                              " bytes exceeds the limit of " + std::to_string(kMaxManifestBytes));
  }
  flatbuffers::Verifier::Options vopts;
  vopts.max_depth = 16;
  vopts.max_tables = 1u << 30;  // tensors are tables; bytes bound the count
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), vopts);
  if (!fb::ManifestBufferHasIdentifier(bytes.data())) {
    return Status::Corruption("manifest: file identifier is not 'RCKM'");
  }
  if (!fb::VerifyManifestBuffer(verifier)) {
    return Status::Corruption("manifest: FlatBuffers verification failed (malformed offsets)");
  }
  const fb::Manifest& m = *fb::GetManifest(bytes.data());
  Manifest out;
  RCKPT_RETURN_IF_ERROR(ParseFileFields(m, bounds, &out));
  RCKPT_RETURN_IF_ERROR(ParseMetadata(m, &out));
  RCKPT_RETURN_IF_ERROR(ParseSections(m, &out));
  RCKPT_RETURN_IF_ERROR(ParseTensors(m, bounds, coverage, &out));
  RCKPT_RETURN_IF_ERROR(CheckExtentsDisjoint(out));
  RCKPT_RETURN_IF_ERROR(ParseRng(m, &out));
  RCKPT_ASSIGN_OR_RETURN(out.tree, ParseTree(m));
  return out;
}

}  // namespace rckpt
