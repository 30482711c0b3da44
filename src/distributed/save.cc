// SaveDistributed (rckpt/distributed.h): the checks, then one of two
// protocols by where the checkpoint goes: a file system (save_file.cc) or
// object storage (save_object.cc). What both share is here: the first
// step's handshake, each rank's share and part of the manifest, rank 0's
// merge of the parts, and the spill file of compressed chunks.
#include "distributed/save.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "core/shard_geometry.h"
#include "distributed/collective.h"
#include "distributed/rank_names.h"
#include "distributed/save_steps.h"
#include "engine/save_options.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "io/atomic_write.h"
#include "rckpt/distributed.h"
#include "util/node.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace collective_save {
namespace {

// This rank's whole tensors' names, as E1 carries them.
std::string WholeNames(const RankState& state) {
  std::string mine;
  for (const TensorEntry& e : state.local.tensors()) mine += e.name + '\0';
  return mine;
}

// The shard blocks' names and geometry, checked before anything is written.
Status CheckShards(int rank, const RankState& state) {
  for (const ShardPart& p : state.shards) {
    const std::string where = "sharded tensor '" + p.name + "'";
    std::string problem = NameProblem(p.name);
    if (problem.empty()) problem = NameProblem(p.section);
    if (!problem.empty()) return Status::InvalidArgument(where + ": name or section " + problem);
    const Block block{p.offsets, p.block.shape()};
    Status s = CheckShardBlock(where + ": block of rank " + std::to_string(rank), p.shape, block);
    if (!s.ok()) return Status::InvalidArgument(s.message());
    if (p.block.nbytes() > 0 && p.block.data() == nullptr) {
      return Status::InvalidArgument(where + ": block has no data");
    }
  }
  return Status::Ok();
}

// `lower`: the names of the whole tensors of the lower ranks (WholeNames).
LocalPlan PlanLocal(const RankState& state, const std::set<std::string, std::less<>>& lower) {
  LocalPlan plan;
  for (const TensorEntry& e : state.local.tensors()) {
    if (lower.count(e.name) != 0) continue;  // a lower rank writes it
    plan.whole.push_back(&e);
    plan.sources.push_back({&e.tensor, e.name});
  }
  for (const ShardPart& p : state.shards) plan.sources.push_back({&p.block, p.name});
  return plan;
}

}  // namespace

std::string PartManifest(int rank, const RankState& state, const LocalPlan& plan,
                         const EncodedRegion& region, const SaveOptions& o, uint64_t data_end,
                         const FlatTree& tree) {
  Manifest part;
  part.alignment = o.alignment;
  part.data_begin = kHeaderSize;
  part.data_end = data_end;
  part.sections = state.local.sections();
  size_t source = 0;
  auto chunks_of = [&](size_t i) {
    const uint64_t end =
        i + 1 < region.first_chunk.size() ? region.first_chunk[i + 1] : region.chunks.size();
    return std::vector<ChunkMeta>(region.chunks.begin() + region.first_chunk[i],
                                  region.chunks.begin() + end);
  };
  for (const TensorEntry* e : plan.whole) {
    TensorMeta& t = part.tensors.emplace_back();
    t.name = e->name;
    t.section = e->section;
    t.role = e->role;
    t.dtype = e->tensor.dtype();
    t.shape = e->tensor.shape();
    t.origin = e->Origin();
    t.nbytes = e->tensor.nbytes();
    t.chunks = chunks_of(source++);
  }
  for (const ShardPart& p : state.shards) {
    if (std::none_of(part.sections.begin(), part.sections.end(),
                     [&](const SectionInfo& s) { return s.name == p.section; })) {
      part.sections.push_back({p.section, DefaultRoleForSection(p.section)});
    }
    Role section_role = Role::kData;
    for (const SectionInfo& s : part.sections) {
      if (s.name == p.section) section_role = s.role;
    }
    TensorMeta& t = part.tensors.emplace_back();
    t.name = p.name;
    t.section = p.section;
    t.role = p.role ? *p.role : DefaultRoleForTensor(p.section, section_role, p.name, p.shape);
    t.dtype = p.block.dtype();
    t.shape = p.shape;
    Result<uint64_t> nbytes = ShapeBytes(p.shape, t.dtype);
    t.nbytes = nbytes.ok() ? *nbytes : 0;
    t.chunks = chunks_of(source++);
    ShardMeta& s = t.shards.emplace_back();
    s.rank = rank;
    s.origin = p.origin ? *p.origin : p.block.device();
    s.offsets = p.offsets;
    s.sizes = p.block.shape();
    s.nbytes = p.block.nbytes();
    s.num_chunks = t.chunks.size();
    t.origin = s.origin;
  }
  for (RngRecord r : state.local.rng()) {
    r.name = RankRngName(rank, r.name);
    part.rng.push_back(std::move(r));
  }
  const std::vector<uint8_t> bytes = BuildManifestFromMeta(part, tree);
  return std::string(bytes.begin(), bytes.end());
}

Result<std::string> PartManifestOf(int rank, const RankState& state, const LocalPlan& plan,
                                   const EncodedRegion& region, const SaveOptions& o,
                                   uint64_t data_end) {
  RCKPT_ASSIGN_OR_RETURN(FlatTree tree, EncodeTree(state.local.Tree()));
  return PartManifest(rank, state, plan, region, o, data_end, tree);
}

// Tensors keep the order in which ranks listed them; a sharded tensor's
// shards are in rank order.
Result<std::vector<uint8_t>> MergeParts(const std::vector<std::string>& parts,
                                        const RankState& state, const SaveOptions& o,
                                        uint64_t data_end) {
  const std::string writer =
      o.writer.empty() ? std::string("rckpt ") + RCKPT_VERSION_STRING : o.writer;
  Manifest merged;
  merged.alignment = o.alignment;
  merged.data_begin = kHeaderSize;
  merged.data_end = data_end;
  merged.writer = writer;
  merged.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  merged.metadata = state.local.Metadata();
  merged.metadata[std::string(kWorldSizeKey)] = std::to_string(parts.size());
  std::map<std::string, size_t, std::less<>> index;
  Value tree;
  tree["common"] = state.common_tree;
  tree["ranks"] = Value::List({});
  const FileBounds bounds{UINT64_MAX, kHeaderSize, data_end, o.alignment};
  for (size_t r = 0; r < parts.size(); ++r) {
    const std::string who = "rank " + std::to_string(r);
    auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(parts[r].data()),
                                          parts[r].size());
    Result<Manifest> part = ParseManifest(bytes, bounds, ShardCoverage::kPart);
    if (!part.ok()) return part.status().WithContext(who + "'s part");
    for (const SectionInfo& s : part->sections) {
      auto it = std::find_if(merged.sections.begin(), merged.sections.end(),
                             [&](const SectionInfo& m) { return m.name == s.name; });
      if (it == merged.sections.end()) {
        merged.sections.push_back(s);
      } else if (it->role != s.role) {
        return Status::InvalidArgument(who + ": section '" + s.name + "' has role " +
                                       std::string(RoleName(s.role)) + ", a lower rank gave " +
                                       std::string(RoleName(it->role)));
      }
    }
    for (TensorMeta& t : part->tensors) {
      auto it = index.find(t.name);
      if (it == index.end()) {
        index.emplace(t.name, merged.tensors.size());
        merged.tensors.push_back(std::move(t));
        continue;
      }
      TensorMeta& m = merged.tensors[it->second];
      if (!m.sharded() || !t.sharded() || m.dtype != t.dtype || m.shape != t.shape ||
          m.section != t.section || m.role != t.role) {
        return Status::InvalidArgument(
            who + ": tensor '" + t.name + "' (" + std::string(DTypeName(t.dtype)) + " " +
            ShapeToString(t.shape) + ", section " + t.section + (t.sharded() ? ", sharded" : "") +
            ") disagrees with a lower rank's (" + std::string(DTypeName(m.dtype)) + " " +
            ShapeToString(m.shape) + ", section " + m.section + (m.sharded() ? ", sharded" : "") +
            ")");
      }
      for (ShardMeta s : t.shards) {
        const size_t first = m.chunks.size();
        m.chunks.insert(m.chunks.end(), t.chunks.begin() + s.first_chunk,
                        t.chunks.begin() + s.first_chunk + s.num_chunks);
        s.first_chunk = first;
        m.shards.push_back(std::move(s));
      }
    }
    merged.rng.insert(merged.rng.end(), part->rng.begin(), part->rng.end());
    tree["ranks"].Append(part->tree);
  }
  for (TensorMeta& t : merged.tensors) {
    if (t.sharded()) t.origin = LowestRankOrigin(t.shards);
  }
  // Each part passed the validator above; what only the whole can show is
  // whether the blocks of all ranks together tile every sharded tensor.
  for (const TensorMeta& t : merged.tensors) {
    if (!t.sharded()) continue;
    std::vector<const Block*> blocks;
    for (const ShardMeta& sm : t.shards) blocks.push_back(&sm);
    Status tiled = CheckShardTiling("tensor '" + t.name + "'", t.shape, blocks);
    if (!tiled.ok()) return Status::InvalidArgument("collective save: " + tiled.message());
  }
  RCKPT_ASSIGN_OR_RETURN(FlatTree flat, EncodeTree(tree));
  return BuildManifestFromMeta(merged, flat);
}

void PutField(std::string* out, std::string_view field) {
  const uint32_t n = static_cast<uint32_t>(field.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof n);
  out->append(field);
}

std::optional<std::vector<std::string_view>> Fields(std::string_view message, size_t count) {
  std::vector<std::string_view> out;
  while (!message.empty()) {
    uint32_t n = 0;
    if (message.size() < sizeof n) return std::nullopt;
    std::memcpy(&n, message.data(), sizeof n);
    message.remove_prefix(sizeof n);
    if (message.size() < n) return std::nullopt;
    out.push_back(message.substr(0, n));
    message.remove_prefix(n);
  }
  if (out.size() != count) return std::nullopt;
  return out;
}

namespace {

// The name of the machine this rank runs on, as the ranks compare it.
std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return std::string();
  return name;
}

// Adds the names of WholeNames' message `names` to `out`.
void AddNames(std::string_view names, std::set<std::string, std::less<>>* out) {
  for (size_t p = 0, q; p < names.size(); p = q + 1) {
    q = names.find('\0', p);
    if (q == std::string_view::npos) q = names.size();
    out->insert(std::string(names.substr(p, q - p)));
  }
}

}  // namespace

Status Malformed() { return Status::IoError("collective save: a malformed message"); }

Status OfSaveTo(const std::string& path, const Status& s) {
  return s.ok() ? s : s.WithContext("save to '" + path + "'");
}

Status CheckBeforeWriting(int rank, const std::string& path, const RankState& state,
                          const SaveOptions& o) {
  RCKPT_RETURN_IF_ERROR(ValidateSaveOptions(o));
  if (path.empty()) return Status::InvalidArgument("save path is empty");
  return CheckShards(rank, state);
}

Result<Introduction> Introduce(Communicator& comm, const RankState& state, const SaveOptions& o,
                               const Status& checked, const std::vector<std::string>& fields) {
  const std::string host = HostName();
  std::string hello;
  PutField(&hello, WholeNames(state));
  PutField(&hello, host);
  for (const std::string& f : fields) PutField(&hello, f);
  RCKPT_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                         AgreeAndAllGather(comm, checked, hello));
  std::set<std::string, std::less<>> lower;
  int on_this_host = 0;
  Introduction out;
  for (int r = 0; r < comm.size(); ++r) {
    std::optional<std::vector<std::string_view>> f = Fields(all[r], 2 + fields.size());
    if (!f) return Malformed();
    if (r < comm.rank()) AddNames((*f)[0], &lower);
    if ((*f)[1] == host) ++on_this_host;
    if (r == 0) out.from_root.assign(f->begin() + 2, f->end());
  }
  out.plan = PlanLocal(state, lower);
  out.options = o;
  if (out.options.threads <= 0) out.options.threads = DefaultThreadsAmong(on_this_host);
  return out;
}

Status EncodeToSpill(FileSystem& fs, const LocalPlan& plan, const SaveOptions& o,
                     const std::string& spill, uint64_t start, EncodedRegion* region) {
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs.OpenForWrite(spill));
  static const std::byte kZeros[kHeaderSize] = {};
  Status s = file->Append({kZeros, start});
  if (s.ok()) s = EncodeRegion(plan.sources, o, *file, start, region);
  Status closed = file->Close();
  return s.ok() ? closed : s;
}

Status CopyFrom(FileSystem& fs, const std::string& from, uint64_t from_offset, uint64_t size,
                const std::function<Status(uint64_t, std::span<const std::byte>)>& put) {
  constexpr uint64_t kPiece = 8ull << 20;
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> in, fs.OpenForRead(from));
  std::vector<std::byte> buf(std::min(kPiece, size));
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(buf.size(), size - done);
    const std::span<std::byte> piece(buf.data(), n);
    RCKPT_RETURN_IF_ERROR(in->ReadAt(from_offset + done, piece));
    RCKPT_RETURN_IF_ERROR(put(done, std::span<const std::byte>(piece)));
    done += n;
  }
  return Status::Ok();
}

SpillRemover::~SpillRemover() {
  if (!path.empty()) (void)RemoveIfExists(fs, path);
}

}  // namespace collective_save

Status SaveDistributedTo(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                         const RankState& state, const SaveOptions& options) {
  const Status checked = collective_save::CheckBeforeWriting(comm.rank(), path, state, options);
  if (IsObjectStoreUrl(path)) {
    return collective_save::SaveToObject(comm, path, state, options, checked);
  }
  return collective_save::SaveToFile(comm, open, path, state, options, checked);
}

Status SaveDistributed(Communicator& comm, const std::string& path, const RankState& state,
                       const SaveOptions& options) {
  FileSystem& fs = options.fs != nullptr ? *options.fs : DefaultFileSystem();
  return SaveDistributedTo(comm, PositionedFileOpener(fs), path, state, options);
}

}  // namespace rckpt
