// SaveDistributed (distributed.h): agree on each rank's extent of the file,
// stream every rank's chunks into its extent, gather the metadata on rank 0,
// which builds the manifest once, closes the file and renames it.
#include "distributed/save.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "core/shard_geometry.h"
#include "distributed/collective.h"
#include "distributed/part_layout.h"
#include "distributed/rank_names.h"
#include "distributed/shared_file.h"
#include "engine/encode.h"
#include "engine/save_options.h"
#include "format/manifest.h"
#include "format/tree_codec.h"
#include "format/writer.h"
#include "util/node.h"
#include "io/atomic_write.h"
#include "rckpt/distributed.h"
#include "rckpt/file.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace {

// A rank's extent of the shared file as a WritableFile: appends go to
// consecutive offsets from `offset` (the encoder gathers small appends).
class ExtentFile : public WritableFile {
 public:
  ExtentFile(SharedFile& file, uint64_t offset) : file_(file), offset_(offset) {}
  Status Append(std::span<const std::byte> data) override {
    RCKPT_RETURN_IF_ERROR(file_.WriteAt(offset_, data));
    offset_ += data.size();
    return Status::Ok();
  }
  // The whole file is synced and closed collectively (CollectiveSave::Run).
  Status Sync() override { return Status::Ok(); }
  Status Close() override { return Status::Ok(); }

 private:
  SharedFile& file_;
  uint64_t offset_;
};

// Copies the bytes [from_offset, from_offset + size) of the local file
// `from` through one bounded buffer to `put(done, piece)`.
template <typename Put>
Status CopyFrom(const std::string& from, uint64_t from_offset, uint64_t size,
                Put&& put) {
  constexpr uint64_t kPiece = 8ull << 20;
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> in, PosixFileSystem().OpenForRead(from));
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

// Appends `n` zero bytes to `file`.
Status AppendZeros(WritableFile& file, uint64_t n) {
  static const std::byte kZeros[64 << 10] = {};
  while (n > 0) {
    const uint64_t k = std::min<uint64_t>(n, sizeof kZeros);
    RCKPT_RETURN_IF_ERROR(file.Append({kZeros, k}));
    n -= k;
  }
  return Status::Ok();
}

// What this rank writes: its whole tensors (those no lower rank also
// holds) and its shard blocks, checked before anything is written.
struct LocalPlan {
  std::vector<const TensorEntry*> whole;
  std::vector<SaveSource> sources;  // whole tensors, then shard blocks
};

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
Status WriteFrame(SharedFile& file, uint64_t data_end, const std::vector<uint8_t>& manifest,
                  uint32_t alignment) {
  Header header;
  header.alignment = alignment;
  header.version_minor = static_cast<uint16_t>(kFormatMinorSharded);
  RCKPT_RETURN_IF_ERROR(file.WriteAt(0, EncodeHeader(header)));
  const Footer footer = FooterFor(data_end, manifest, header.version_minor);
  RCKPT_RETURN_IF_ERROR(file.WriteAt(footer.manifest_offset,
                                     std::as_bytes(std::span<const uint8_t>(manifest))));
  return file.WriteAt(footer.manifest_offset + manifest.size(), EncodeFooter(footer));
}

// Fields of one message: each a 32-bit length and its bytes.
void PutField(std::string* out, std::string_view field) {
  const uint32_t n = static_cast<uint32_t>(field.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof n);
  out->append(field);
}

// The fields of `message`, or nullopt when it is not `count` of them.
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

// The steps, each ending in the one collective that both exchanges what the
// next step needs and agrees on every rank's outcome so far, so no rank
// waits on a failed one:
//   1. options and shard blocks checked, rank 0 creates the temporary:
//      exchange the whole tensors' names, the host names, the temporary's
//      name;
//   2. every rank opens the temporary and sizes its region (compressed
//      chunks: encodes them into a spill file): exchange the sizes (an
//      exclusive scan of them places each rank's extent);
//   3. every rank writes its extent: gather the manifest parts on rank 0,
//      which merges them and writes header, manifest and footer;
//   4. every rank syncs and closes the file: agree;
//   5. rank 0 renames it over the path: agree.
class CollectiveSave {
 public:
  CollectiveSave(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                 const RankState& state, const SaveOptions& o)
      : comm_(comm), open_(open), path_(path), state_(state), o_(o),
        rank_(comm.rank()), size_(comm.size()) {}

  Status Run() {
    // Step 1.
    Status s = ValidateSaveOptions(o_);
    if (s.ok() && path_.empty())
      s = Status::InvalidArgument("save path is empty");
    if (s.ok()) s = CheckShards(rank_, state_);
    if (IsObjectStoreUrl(path_)) return RunShared(s);
    // Rank 0 owns the temporary: it creates and names it for every rank,
    // removes it on failure (when `target_` goes) and renames it on success.
    if (s.ok() && rank_ == 0) {
      target_.emplace(PosixFileSystem(), path_, o_.replace);
      Result<std::unique_ptr<WritableFile>> f = target_->Open();
      s = f.ok() ? (*f)->Close() : f.status();
    }
    const std::string host = HostName();
    std::string hello;
    PutField(&hello, WholeNames(state_));
    PutField(&hello, host);
    PutField(&hello, rank_ == 0 && s.ok() ? target_->temp_path() : std::string());
    Result<std::vector<std::string>> all = AgreeAndAllGather(comm_, s, hello);
    RCKPT_RETURN_IF_ERROR(Cleanup(all.status()));
    std::set<std::string, std::less<>> lower;
    int on_this_host = 0;
    for (int r = 0; r < size_; ++r) {
      std::optional<std::vector<std::string_view>> f = Fields((*all)[r], 3);
      if (!f) return Cleanup(Status::IoError("collective save: a malformed message"));
      if (r < rank_) AddNames((*f)[0], &lower);
      if ((*f)[1] == host) ++on_this_host;
      if (r == 0) tmp_ = std::string((*f)[2]);
    }
    ResolveRankThreads(on_this_host);

    // Step 2, and from there on every rank syncs and closes the file it
    // opened whatever happened, and takes part in every agreement.
    Result<std::unique_ptr<SharedFile>> file = open_(comm_, tmp_);
    const LocalPlan plan = PlanLocal(state_, lower);
    Status written = WriteAll(file.ok() ? file->get() : nullptr, file.status(), plan);
    // A failure before any rank wrote was agreed on in step 2: every rank
    // returns it, the file closed unsynced (and removed by rank 0).
    if (!extents_agreed_) return Cleanup(written);
    // Step 4: every writer's bytes reach the disk before the rename makes
    // them the checkpoint; every rank syncs and closes (collective for
    // MPI-IO).
    Status closed = (*file)->SyncAndClose();
    if (written.ok()) written = closed;
    RCKPT_RETURN_IF_ERROR(Cleanup(Agree(comm_, written)));
    // Step 5.
    Status renamed;
    if (rank_ == 0) renamed = target_->Commit();
    return Cleanup(Agree(comm_, renamed));
  }

  // A save to object storage: one multipart upload shared by the ranks
  // (rckpt/file.h's shared writes) in place of the temporary file:
  //   1. as above, and rank 0 starts the upload: exchange the whole
  //      tensors' names, the host names, the upload's id and limits;
  //   2. every rank sizes its region: exchange the sizes, from which every
  //      rank computes the same layout of parts (part_layout.h);
  //   3. every rank uploads its region, padded, as its own parts: gather
  //      the manifest parts and the parts' ETags on rank 0, which uploads
  //      manifest and footer as the last part and completes the upload;
  //   4. agree.
  // On any failure, a collective's included, every rank that knows the
  // upload aborts it (an abort after the completion leaves the object).
  Status RunShared(Status s) {
    FileSystem& fs = o_.fs != nullptr ? *o_.fs : DefaultFileSystem();
    std::optional<SharedWrite> write;
    if (s.ok() && rank_ == 0) {
      Result<SharedWrite> w = fs.StartSharedWrite(path_);
      if (w.ok()) write = std::move(*w);
      s = w.status();
    }
    const std::string host = HostName();
    std::string hello;
    PutField(&hello, WholeNames(state_));
    PutField(&hello, host);
    PutField(&hello, write ? write->id : std::string());
    PutField(&hello, write ? Limits(*write) : std::string());
    PutField(&hello, write ? write->marker : std::string());
    Result<std::vector<std::string>> all = AgreeAndAllGather(comm_, s, hello);
    if (!all.ok()) return Abandon(fs, write, all.status());
    std::set<std::string, std::less<>> lower;
    int on_this_host = 0;
    for (int r = 0; r < size_; ++r) {
      std::optional<std::vector<std::string_view>> f = Fields((*all)[r], 5);
      if (!f)
        return Abandon(fs, write,
                       Status::IoError("collective save: a malformed message"));
      if (r < rank_) AddNames((*f)[0], &lower);
      if ((*f)[1] == host) ++on_this_host;
      if (r == 0 && !write) {
        write = ParseLimits((*f)[2], (*f)[3]);
        if (write) write->marker = std::string((*f)[4]);
      }
    }
    if (!write)
      return Abandon(fs, write,
                     Status::IoError("collective save: a malformed message"));
    write->replace = o_.replace;
    ResolveRankThreads(on_this_host);

    // Step 2.
    const LocalPlan plan = PlanLocal(state_, lower);
    const uint64_t start = rank_ == 0 ? kHeaderSize : 0;
    const bool raw = opts_.codec == Codec::kNone;
    const std::string spill = raw ? std::string() : TempPathFor(SpillBase());
    SpillRemover remove_spill{spill};
    EncodedRegion region;
    uint64_t size = 0;
    Status sized;
    if (raw) {
      Result<uint64_t> end = RawRegionEnd(plan.sources, opts_, start);
      if (end.ok()) size = *end - start;
      sized = end.status();
    } else {
      sized = EncodeToSpill(plan, spill, start, &region);
      size = region.end - start;
    }
    const uint64_t length = start + size;
    Result<std::vector<std::string>> lengths = AgreeAndAllGather(
        comm_, sized,
        std::string_view(reinterpret_cast<const char*>(&length),
                         sizeof length));
    if (!lengths.ok()) return Abandon(fs, write, lengths.status());
    std::vector<uint64_t> by_rank;
    for (const std::string& l : *lengths) {
      uint64_t n = 0;
      if (l.size() != sizeof n)
        return Abandon(fs, write, Status::IoError("size exchange: short"));
      std::memcpy(&n, l.data(), sizeof n);
      by_rank.push_back(n);
    }
    // Every rank computes the same layout, or the same error.
    Result<PartLayout> layout = LayOutParts(by_rank, opts_.alignment, *write);
    if (!layout.ok()) return Abandon(fs, write, layout.status());
    const RankParts& mine = layout->ranks[rank_];

    // Step 3.
    std::string receipts;
    Status up = UploadRegion(fs, *write, mine, plan, spill, start, size,
                             &region, &receipts);
    std::string payload;
    if (up.ok()) {
      Result<FlatTree> tree = EncodeTree(state_.local.Tree());
      if (tree.ok()) {
        PutField(&payload, PartManifest(rank_, state_, plan, region, opts_,
                                        layout->data_end, *tree));
        PutField(&payload, receipts);
      } else {
        up = tree.status();
      }
    }
    Result<std::vector<std::string>> parts =
        GatherOutcomes(comm_, 0, up, payload);
    Status done = parts.status();
    if (parts.ok() && rank_ == 0)
      done = CompleteShared(fs, *write, *layout, *parts);
    // Step 4. A rank lost after the parts were in (the agreement fails)
    // does not undo rank 0's completion: the object is the save's then, and
    // every rank that can tell so (rank 0; another rank finding the object
    // carrying the upload's marker) returns OK.
    Status agreed = Agree(comm_, done);
    if (!agreed.ok()) {
      if (done.ok() && (rank_ == 0 || CommittedAnyway(fs, *write))) return Status::Ok();
      return Abandon(fs, write, agreed);
    }
    return Status::Ok();
  }

 private:
  // Removes the spill file on every way out.
  struct SpillRemover {
    const std::string& path;
    ~SpillRemover() {
      if (!path.empty()) (void)RemoveIfExists(PosixFileSystem(), path);
    }
  };

  // threads = 0 shares the process's CPUs (affinity, cgroup quota) among
  // the ranks on this host, as the communicator counts them.
  void ResolveRankThreads(int on_this_host) {
    opts_ = o_;
    if (opts_.threads <= 0) opts_.threads = rckpt::DefaultThreadsAmong(on_this_host);
  }

  // Where a compressed save to object storage spills its chunks: the
  // temporary directory (there is no directory beside an object).
  std::string SpillBase() const {
    std::error_code ec;
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    return (ec ? std::string("/tmp") : tmp.string()) + "/rckpt-spill-" +
           std::to_string(rank_) + ".rckpt";
  }

  static std::string Limits(const SharedWrite& w) {
    return std::to_string(w.min_part_bytes) + " " +
           std::to_string(w.max_part_bytes) + " " + std::to_string(w.max_parts);
  }

  static std::optional<SharedWrite> ParseLimits(std::string_view id,
                                                std::string_view limits) {
    SharedWrite w;
    w.id = std::string(id);
    unsigned long long a = 0, b = 0, c = 0;
    if (id.empty() || std::sscanf(std::string(limits).c_str(), "%llu %llu %llu",
                                  &a, &b, &c) != 3) {
      return std::nullopt;
    }
    w.min_part_bytes = a;
    w.max_part_bytes = b;
    w.max_parts = c;
    return w;
  }

  // This rank's region uploaded as its parts: rank 0's header, the chunks
  // (raw ones encoded straight into the parts, compressed ones copied from
  // the spill file), zeros to the region's extent. `receipts`: two fields
  // per part, its number (8 bytes) and ETag, then its checksum.
  Status UploadRegion(FileSystem& fs, const SharedWrite& write,
                      const RankParts& mine, const LocalPlan& plan,
                      const std::string& spill, uint64_t start, uint64_t size,
                      EncodedRegion* region, std::string* receipts) {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<SharedWriteRegion> out,
                           fs.OpenSharedWriteRegion(
                               path_, write, mine.first_part, mine.part_bytes));
    if (rank_ == 0) {
      Header header;
      header.alignment = opts_.alignment;
      header.version_minor = static_cast<uint16_t>(kFormatMinorSharded);
      RCKPT_RETURN_IF_ERROR(out->Append(EncodeHeader(header)));
    }
    const uint64_t base = mine.start + start;
    if (spill.empty()) {
      RCKPT_RETURN_IF_ERROR(
          EncodeRegion(plan.sources, opts_, *out, base, region));
      if (region->end != base + size) {
        return Status::IoError("rank " + std::to_string(rank_) + " encoded " +
                               std::to_string(region->end - base) +
                               " bytes into a region of " +
                               std::to_string(size));
      }
    } else {
      if (rank_ != 0) {
        for (ChunkMeta& c : region->chunks) c.offset += base;
      }
      RCKPT_RETURN_IF_ERROR(CopyFrom(
          spill, start, size, [&](uint64_t, std::span<const std::byte> p) {
            return out->Append(p);
          }));
      if (opts_.progress && !opts_.progress(size, size)) {
        return Status::IoError("save cancelled by the progress callback");
      }
    }
    RCKPT_RETURN_IF_ERROR(AppendZeros(*out, mine.extent - start - size));
    RCKPT_ASSIGN_OR_RETURN(std::vector<SharedPart> parts, out->Finish());
    for (const SharedPart& p : parts) {
      std::string field(reinterpret_cast<const char*>(&p.number),
                        sizeof p.number);
      PutField(receipts, field + p.tag);
      PutField(receipts, p.checksum);
    }
    return Status::Ok();
  }

  // Rank 0, once every rank's region is uploaded: the manifest from every
  // rank's part, uploaded with the footer as the last part; then the
  // upload completed with every part's ETag in part order.
  Status CompleteShared(FileSystem& fs, const SharedWrite& write,
                        const PartLayout& layout,
                        const std::vector<std::string>& payloads) {
    std::vector<std::string> manifests;
    std::vector<SharedPart> all;
    for (int r = 0; r < size_; ++r) {
      std::optional<std::vector<std::string_view>> f = Fields(payloads[r], 2);
      const size_t count = layout.ranks[r].part_bytes.size();
      std::optional<std::vector<std::string_view>> receipts =
          f ? Fields((*f)[1], 2 * count) : std::nullopt;
      if (!receipts)
        return Status::IoError("collective save: a malformed message");
      manifests.emplace_back((*f)[0]);
      for (size_t i = 0; i < receipts->size(); i += 2) {
        const std::string_view e = (*receipts)[i];
        SharedPart p;
        if (e.size() < sizeof p.number)
          return Status::IoError("collective save: a short ETag");
        std::memcpy(&p.number, e.data(), sizeof p.number);
        p.tag = std::string(e.substr(sizeof p.number));
        p.checksum = std::string((*receipts)[i + 1]);
        all.push_back(std::move(p));
      }
    }
    const std::string writer =
        opts_.writer.empty() ? std::string("rckpt ") + RCKPT_VERSION_STRING
                             : opts_.writer;
    RCKPT_ASSIGN_OR_RETURN(
        std::vector<uint8_t> manifest,
        MergeParts(manifests, state_, opts_, layout.data_end, writer));
    Header header;
    header.version_minor = static_cast<uint16_t>(kFormatMinorSharded);
    const Footer footer =
        FooterFor(layout.data_end, manifest, header.version_minor);
    std::string tail(footer.manifest_offset - layout.data_end, '\0');
    tail.append(reinterpret_cast<const char*>(manifest.data()),
                manifest.size());
    const auto foot = EncodeFooter(footer);
    tail.append(reinterpret_cast<const char*>(foot.data()), foot.size());
    // Parts of the regions' size, the last one no larger (R2, Garage).
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<SharedWriteRegion> last,
                           fs.OpenSharedWriteRegion(path_, write, layout.last_part,
                                                    TailPartBytes(layout, tail.size())));
    RCKPT_RETURN_IF_ERROR(
        last->Append(std::as_bytes(std::span<const char>(tail))));
    RCKPT_ASSIGN_OR_RETURN(std::vector<SharedPart> parts, last->Finish());
    all.insert(all.end(), parts.begin(), parts.end());
    return fs.CommitSharedWrite(path_, write, all);
  }

  // Whether rank 0 completed the upload (the object carries its marker).
  bool CommittedAnyway(FileSystem& fs, const SharedWrite& write) {
    Result<bool> committed = fs.SharedWriteCommitted(path_, write);
    return committed.ok() && *committed;
  }

  // The upload aborted by this rank (when it knows it), and `s` returned.
  Status Abandon(FileSystem& fs, const std::optional<SharedWrite>& write,
                 const Status& s) {
    if (write) (void)fs.AbortSharedWrite(path_, *write);
    return Cleanup(s);
  }

  // Steps 2 and 3: this rank's extent, its data, the metadata. A rank's
  // chunks stream to the file through the encoder's bounded buffers: raw
  // chunks straight into its extent, whose size is known before encoding;
  // compressed ones, whose sizes are known only once compressed, through a
  // spill file beside the checkpoint, then copied into the extent. Either
  // way a rank's memory does not grow with its share of the checkpoint.
  // `file`: the file this rank opened, null when `opened` failed. Returns
  // the agreed failure of step 2, or this rank's outcome of step 3 (rank 0:
  // every rank's), not yet agreed on.
  Status WriteAll(SharedFile* file, const Status& opened, const LocalPlan& plan) {
    // Rank 0's region follows the header; the others' start aligned, so a
    // region laid out from offset 0 keeps every chunk's alignment anywhere.
    const uint64_t start = rank_ == 0 ? kHeaderSize : 0;
    EncodedRegion region;
    uint64_t size = 0;
    const bool raw = opts_.codec == Codec::kNone;
    // A temporary name of the checkpoint's own: a crash leaves nothing that
    // the next save to this path does not clean up; any other way out of
    // here removes it.
    const std::string spill = raw ? std::string() : TempPathFor(path_);
    SpillRemover remove_spill{spill};
    Status sized = opened;
    if (sized.ok() && raw) {
      Result<uint64_t> end = RawRegionEnd(plan.sources, opts_, start);
      if (end.ok()) size = *end - start;
      sized = end.status();
    } else if (sized.ok()) {
      sized = EncodeToSpill(plan, spill, start, &region);
      size = region.end - start;
    }
    // The exclusive scan of the ranks' sizes, every rank's aligned.
    RCKPT_ASSIGN_OR_RETURN(
        const std::vector<std::string> sizes,
        AgreeAndAllGather(comm_, sized,
                          std::string_view(reinterpret_cast<const char*>(&size), sizeof size)));
    extents_agreed_ = true;  // every rank has its file open
    uint64_t base = kHeaderSize, data_end = kHeaderSize;
    for (int r = 0; r < size_; ++r) {
      uint64_t n = 0;
      if (sizes[r].size() != sizeof n) return Status::IoError("size exchange: short message");
      std::memcpy(&n, sizes[r].data(), sizeof n);
      const uint64_t b = r == 0 ? kHeaderSize : AlignUp(data_end, opts_.alignment);
      if (r == rank_) base = b;
      data_end = b + n;
    }
    Status s;
    if (raw) {
      ExtentFile extent(*file, base);
      s = EncodeRegion(plan.sources, opts_, extent, base, &region);
      if (s.ok() && region.end != base + size) {
        s = Status::IoError("rank " + std::to_string(rank_) + " encoded " +
                            std::to_string(region.end - base) + " bytes into an extent of " +
                            std::to_string(size));
      }
    } else {
      if (rank_ != 0) {
        for (ChunkMeta& c : region.chunks) c.offset += base;
      }
      s = CopyFrom(spill, start, size,
                   [&](uint64_t done, std::span<const std::byte> piece) {
                     return file->WriteAt(base + done, piece);
                   });
      if (s.ok() && opts_.progress && !opts_.progress(size, size)) {
        s = Status::IoError("save cancelled by the progress callback");
      }
    }
    std::string part;
    if (s.ok()) {
      Result<FlatTree> tree = EncodeTree(state_.local.Tree());
      if (tree.ok()) {
        part = PartManifest(rank_, state_, plan, region, opts_, data_end, *tree);
      } else {
        s = tree.status();
      }
    }
    Result<std::vector<std::string>> parts = GatherOutcomes(comm_, 0, s, part);
    if (!parts.ok() || rank_ != 0) return parts.status();
    const std::string writer =
        opts_.writer.empty() ? std::string("rckpt ") + RCKPT_VERSION_STRING : opts_.writer;
    Result<std::vector<uint8_t>> manifest = MergeParts(*parts, state_, opts_, data_end, writer);
    return manifest.ok() ? WriteFrame(*file, data_end, *manifest, opts_.alignment)
                         : manifest.status();
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
    if (s.ok()) s = EncodeRegion(plan.sources, opts_, *file, start, region);
    Status closed = file->Close();
    return s.ok() ? closed : s;
  }

  // The temporary itself goes with target_ on rank 0, after every rank
  // closed it.
  Status Cleanup(const Status& s) {
    return s.ok() ? s : s.WithContext("save to '" + path_ + "'");
  }

  Communicator& comm_;
  const SharedFileOpener& open_;
  const std::string& path_;
  const RankState& state_;
  const SaveOptions& o_;
  SaveOptions opts_;  // o_, with its threads resolved for this rank
  const int rank_;
  const int size_;
  std::optional<AtomicFile> target_;  // rank 0
  std::string tmp_;
  bool extents_agreed_ = false;  // step 2 succeeded on every rank
};

}  // namespace

Status SaveDistributedTo(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                         const RankState& state, const SaveOptions& options) {
  CollectiveSave save(comm, open, path, state, options);
  return save.Run();
}

Status SaveDistributed(Communicator& comm, const std::string& path, const RankState& state,
                       const SaveOptions& options) {
  return SaveDistributedTo(comm, OpenPositionedFile, path, state, options);
}

}  // namespace rckpt
