// SaveDistributed (distributed.h): agree on each rank's extent of the file,
// stream every rank's chunks into its extent with MPI-IO, gather the
// metadata on rank 0, which builds the manifest once, closes the file and
// renames it.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "distributed/collective.h"
#include "distributed/rank_names.h"
#include "core/shard_geometry.h"
#include "engine/encode.h"
#include "format/manifest.h"
#include "format/tree_codec.h"
#include "format/writer.h"
#include "io/atomic_write.h"
#include "rckpt/distributed.h"
#include "rckpt/file.h"

namespace rckpt {
namespace {

// MPI counts are ints: large regions are written in pieces of this size.
constexpr uint64_t kMaxWriteBytes = 1ull << 30;

Status WriteAt(MPI_File fh, uint64_t offset, std::span<const std::byte> data) {
  for (uint64_t done = 0; done < data.size();) {
    const int n = static_cast<int>(std::min<uint64_t>(kMaxWriteBytes, data.size() - done));
    MPI_Status st;
    RCKPT_RETURN_IF_ERROR(MpiStatus(
        MPI_File_write_at(fh, static_cast<MPI_Offset>(offset + done), data.data() + done, n,
                          MPI_BYTE, &st),
        "write at offset " + std::to_string(offset + done)));
    int written = 0;
    MPI_Get_count(&st, MPI_BYTE, &written);
    if (written != n) {
      return Status::IoError("short write at offset " + std::to_string(offset + done) + ": " +
                             std::to_string(written) + " of " + std::to_string(n) + " bytes");
    }
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// A rank's extent of the shared file as a WritableFile: appends go to
// consecutive offsets from `offset` (the encoder gathers small appends).
class ExtentFile : public WritableFile {
 public:
  ExtentFile(MPI_File fh, uint64_t offset) : fh_(fh), offset_(offset) {}
  Status Append(std::span<const std::byte> data) override {
    RCKPT_RETURN_IF_ERROR(WriteAt(fh_, offset_, data));
    offset_ += data.size();
    return Status::Ok();
  }
  // The whole file is synced and closed collectively (CollectiveSave::Run).
  Status Sync() override { return Status::Ok(); }
  Status Close() override { return Status::Ok(); }

 private:
  MPI_File fh_;
  uint64_t offset_;
};

// Copies the bytes [from_offset, from_offset + size) of the local file
// `from` into the shared file at `offset` through one bounded buffer.
Status CopyInto(MPI_File fh, uint64_t offset, const std::string& from, uint64_t from_offset,
                uint64_t size) {
  constexpr uint64_t kPiece = 8ull << 20;
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> in, PosixFileSystem().OpenForRead(from));
  std::vector<std::byte> buf(std::min(kPiece, size));
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(buf.size(), size - done);
    const std::span<std::byte> piece(buf.data(), n);
    RCKPT_RETURN_IF_ERROR(in->ReadAt(from_offset + done, piece));
    RCKPT_RETURN_IF_ERROR(WriteAt(fh, offset + done, piece));
    done += n;
  }
  return Status::Ok();
}

// What this rank writes: its whole tensors (those no lower rank also
// holds) and its shard blocks, checked before anything is written.
struct LocalPlan {
  std::vector<const TensorEntry*> whole;
  std::vector<SaveSource> sources;  // whole tensors, then shard blocks
};

Result<LocalPlan> PlanLocal(MPI_Comm comm, int rank, const RankState& state) {
  LocalPlan plan;
  std::string mine;
  for (const TensorEntry& e : state.local.tensors()) mine += e.name + '\0';
  const std::vector<std::string> all = AllGatherBytes(comm, mine);
  std::set<std::string, std::less<>> lower;
  for (int r = 0; r < rank; ++r) {
    for (size_t p = 0, q; p < all[r].size(); p = q + 1) {
      q = all[r].find('\0', p);
      lower.insert(all[r].substr(p, q - p));
    }
  }
  for (const TensorEntry& e : state.local.tensors()) {
    if (lower.count(e.name) != 0) continue;  // a lower rank writes it
    plan.whole.push_back(&e);
    plan.sources.push_back({&e.tensor, e.name});
  }
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
    plan.sources.push_back({&p.block, p.name});
  }
  return plan;
}

// This rank's part of the manifest: its tensors and shards with their
// chunks at their final offsets, its RNG records named by rank, its tree.
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

// Rank 0: every rank's part merged into the file's manifest. Tensors keep
// the order in which ranks listed them; a sharded tensor's shards are in
// rank order.
Result<std::vector<uint8_t>> MergeParts(const std::vector<std::string>& parts,
                                        const RankState& state, const SaveOptions& o,
                                        uint64_t data_end, const std::string& writer) {
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

// Rank 0 closes the file: header at 0, manifest and footer after the data.
Status WriteFrame(MPI_File fh, uint64_t data_end, const std::vector<uint8_t>& manifest,
                  uint32_t alignment) {
  Header header;
  header.alignment = alignment;
  header.version_minor = static_cast<uint16_t>(kFormatMinorSharded);
  RCKPT_RETURN_IF_ERROR(WriteAt(fh, 0, EncodeHeader(header)));
  const Footer footer = FooterFor(data_end, manifest, header.version_minor);
  RCKPT_RETURN_IF_ERROR(
      WriteAt(fh, footer.manifest_offset, std::as_bytes(std::span<const uint8_t>(manifest))));
  return WriteAt(fh, footer.manifest_offset + manifest.size(), EncodeFooter(footer));
}

class CollectiveSave {
 public:
  CollectiveSave(MPI_Comm comm, const std::string& path, const RankState& state,
                 const SaveOptions& o)
      : comm_(comm), path_(path), state_(state), o_(o) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }

  Status Run() {
    Status s = ValidateSaveOptions(o_);
    if (s.ok() && path_.empty()) s = Status::InvalidArgument("save path is empty");
    RCKPT_RETURN_IF_ERROR(Agree(comm_, s));
    Result<LocalPlan> plan = PlanLocal(comm_, rank_, state_);
    RCKPT_RETURN_IF_ERROR(Agree(comm_, plan.status()));
    // Rank 0 owns the temporary: it names it for every rank, removes it on
    // failure (when `target_` goes) and renames it on success.
    if (rank_ == 0) target_.emplace(PosixFileSystem(), path_);
    tmp_ = BroadcastString(comm_, 0, rank_ == 0 ? target_->temp_path() : std::string());
    RCKPT_RETURN_IF_ERROR(Agree(comm_, MpiStatus(MPI_File_open(comm_, tmp_.c_str(),
                                                               MPI_MODE_CREATE | MPI_MODE_WRONLY,
                                                               MPI_INFO_NULL, &fh_),
                                                 "open '" + tmp_ + "'")));
    open_ = true;
    Status written = WriteAll(*plan);
    // Every writer's bytes reach the disk before the rename makes them the
    // checkpoint; MPI_File_sync is collective, so every rank calls it.
    Status synced = MpiStatus(MPI_File_sync(fh_), "sync '" + tmp_ + "'");
    if (written.ok()) written = synced;
    Status closed = MpiStatus(MPI_File_close(&fh_), "close '" + tmp_ + "'");
    open_ = false;
    if (written.ok()) written = closed;
    RCKPT_RETURN_IF_ERROR(Cleanup(Agree(comm_, written)));
    Status renamed;
    if (rank_ == 0) renamed = target_->Commit();
    return Cleanup(Agree(comm_, renamed));
  }

  ~CollectiveSave() {
    if (open_) MPI_File_close(&fh_);
  }

 private:
  // The extents, this rank's data, the metadata: each step's outcome is
  // agreed on before the next, so no rank waits on a failed one. A rank's
  // chunks stream to the file through the encoder's bounded buffers: raw
  // chunks straight into its extent, whose size is known before encoding;
  // compressed ones, whose sizes are known only once compressed, through a
  // spill file beside the checkpoint, then copied into the extent. Either
  // way a rank's memory does not grow with its share of the checkpoint.
  Status WriteAll(const LocalPlan& plan) {
    // Rank 0's region follows the header; the others' start aligned, so a
    // region laid out from offset 0 keeps every chunk's alignment anywhere.
    const uint64_t start = rank_ == 0 ? kHeaderSize : 0;
    EncodedRegion region;
    uint64_t size = 0;
    const bool raw = o_.codec == Codec::kNone;
    // A temporary name of the checkpoint's own: a crash leaves nothing that
    // the next save to this path does not clean up; any other way out of
    // here removes it.
    const std::string spill = raw ? std::string() : TempPathFor(path_);
    struct SpillRemover {
      const std::string& path;
      ~SpillRemover() {
        if (!path.empty()) (void)RemoveIfExists(PosixFileSystem(), path);
      }
    } remove_spill{spill};
    if (raw) {
      Result<uint64_t> end = RawRegionEnd(plan.sources, o_, start);
      if (end.ok()) size = *end - start;
      RCKPT_RETURN_IF_ERROR(Agree(comm_, end.status()));
    } else {
      RCKPT_RETURN_IF_ERROR(Agree(comm_, EncodeToSpill(plan, spill, start, &region)));
      size = region.end - start;
    }
    std::vector<uint64_t> sizes(size_);
    MPI_Allgather(&size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_);
    uint64_t base = kHeaderSize, data_end = kHeaderSize;
    for (int r = 0; r < size_; ++r) {
      const uint64_t b = r == 0 ? kHeaderSize : AlignUp(data_end, o_.alignment);
      if (r == rank_) base = b;
      data_end = b + sizes[r];
    }
    Status s;
    if (raw) {
      ExtentFile extent(fh_, base);
      s = EncodeRegion(plan.sources, o_, extent, base, &region);
      if (s.ok() && region.end != base + size) {
        s = Status::IoError("rank " + std::to_string(rank_) + " encoded " +
                            std::to_string(region.end - base) + " bytes into an extent of " +
                            std::to_string(size));
      }
    } else {
      if (rank_ != 0) {
        for (ChunkMeta& c : region.chunks) c.offset += base;
      }
      s = CopyInto(fh_, base, spill, start, size);
      if (s.ok() && o_.progress && !o_.progress(size, size)) {
        s = Status::IoError("save cancelled by the progress callback");
      }
    }
    RCKPT_RETURN_IF_ERROR(Agree(comm_, s));
    Result<FlatTree> tree = EncodeTree(state_.local.Tree());
    RCKPT_RETURN_IF_ERROR(Agree(comm_, tree.status()));
    const std::vector<std::string> parts = GatherBytes(
        comm_, 0, PartManifest(rank_, state_, plan, region, o_, data_end, *tree));
    Status closed;
    if (rank_ == 0) {
      const std::string writer =
          o_.writer.empty() ? std::string("rckpt ") + RCKPT_VERSION_STRING : o_.writer;
      Result<std::vector<uint8_t>> manifest = MergeParts(parts, state_, o_, data_end, writer);
      closed = manifest.ok() ? WriteFrame(fh_, data_end, *manifest, o_.alignment)
                             : manifest.status();
    }
    return Agree(comm_, closed);
  }

  // Encodes this rank's chunks into a local spill file, laid out as its
  // region at `start`.
  Status EncodeToSpill(const LocalPlan& plan, const std::string& spill, uint64_t start,
                       EncodedRegion* region) {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                           PosixFileSystem().OpenForWrite(spill));
    // The spill file holds the region from its offset `start` on: bytes
    // before it are never read.
    static const std::byte kZeros[kHeaderSize] = {};
    Status s = file->Append({kZeros, start});
    if (s.ok()) s = EncodeRegion(plan.sources, o_, *file, start, region);
    Status closed = file->Close();
    return s.ok() ? closed : s;
  }

  // The temporary itself goes with target_ on rank 0, after every rank
  // closed it.
  Status Cleanup(const Status& s) {
    return s.ok() ? s : s.WithContext("save to '" + path_ + "'");
  }

  MPI_Comm comm_;
  const std::string& path_;
  const RankState& state_;
  const SaveOptions& o_;
  int rank_ = 0;
  int size_ = 1;
  std::optional<AtomicFile> target_;  // rank 0
  std::string tmp_;
  MPI_File fh_ = MPI_FILE_NULL;
  bool open_ = false;
};

}  // namespace

Status SaveDistributed(MPI_Comm comm, const std::string& path, const RankState& state,
                       const SaveOptions& options) {
  CollectiveSave save(comm, path, state, options);
  return save.Run();
}

}  // namespace rckpt
