// The collective save to a file system: a temporary beside the path that
// every rank writes its own extent of (positioned writes or MPI-IO), renamed
// over the path once every rank's bytes are durable. Each step ends in the
// one collective that both exchanges what the next step needs and agrees on
// every rank's outcome so far, so no rank waits on a failed one:
//   1. options and shard blocks checked, rank 0 creates the temporary:
//      Introduce, with the temporary's name;
//   2. every rank opens the temporary and sizes its region (compressed
//      chunks: encodes them into a spill file beside the checkpoint):
//      exchange the sizes (an exclusive scan of them places each rank's
//      extent);
//   3. every rank writes its extent: gather the manifest parts on rank 0,
//      which merges them and writes header, manifest and footer;
//   4. every rank syncs and closes the file: agree;
//   5. rank 0 renames it over the path: agree.
// Every file goes through the save's file system (SaveOptions::fs).
#include <cstring>
#include <optional>

#include "distributed/collective.h"
#include "distributed/save_steps.h"
#include "format/layout.h"
#include "format/writer.h"
#include "io/atomic_write.h"

namespace rckpt::collective_save {
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
  // The whole file is synced and closed collectively (FileSave::Run).
  Status Sync() override { return Status::Ok(); }
  Status Close() override { return Status::Ok(); }

 private:
  SharedFile& file_;
  uint64_t offset_;
};

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

class FileSave {
 public:
  FileSave(Communicator& comm, const SharedFileOpener& open, const std::string& path,
           const RankState& state, const SaveOptions& o)
      : comm_(comm), open_(open), path_(path), state_(state), o_(o),
        fs_(o.fs != nullptr ? *o.fs : DefaultFileSystem()), rank_(comm.rank()),
        size_(comm.size()) {}

  Status Run(Status s) {
    // Step 1. Rank 0 owns the temporary: it creates and names it for every
    // rank, removes it on failure (when `target_` goes) and renames it on
    // success.
    if (s.ok() && rank_ == 0) {
      target_.emplace(fs_, path_, o_.replace);
      Result<std::unique_ptr<WritableFile>> f = target_->Open();
      s = f.ok() ? (*f)->Close() : f.status();
    }
    Result<Introduction> intro =
        Introduce(comm_, state_, o_, s, {rank_ == 0 && s.ok() ? target_->temp_path() : ""});
    RCKPT_RETURN_IF_ERROR(Cleanup(intro.status()));
    opts_ = intro->options;
    const std::string& tmp = intro->from_root[0];

    // Step 2, and from there on every rank syncs and closes the file it
    // opened whatever happened, and takes part in every agreement.
    Result<std::unique_ptr<SharedFile>> file = open_(comm_, tmp);
    Status written = WriteAll(file.ok() ? file->get() : nullptr, file.status(), intro->plan);
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

 private:
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
    SpillRemover remove_spill{fs_, spill};
    Status sized = opened;
    if (sized.ok() && raw) {
      Result<uint64_t> end = RawRegionEnd(plan.sources, opts_, start);
      if (end.ok()) size = *end - start;
      sized = end.status();
    } else if (sized.ok()) {
      sized = EncodeToSpill(fs_, plan, opts_, spill, start, &region);
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
      s = CopyFrom(fs_, spill, start, size,
                   [&](uint64_t done, std::span<const std::byte> piece) {
                     return file->WriteAt(base + done, piece);
                   });
      if (s.ok() && opts_.progress && !opts_.progress(size, size)) {
        s = Status::IoError("save cancelled by the progress callback");
      }
    }
    std::string part;
    if (s.ok()) {
      Result<std::string> made = PartManifestOf(rank_, state_, plan, region, opts_, data_end);
      if (made.ok()) part = std::move(*made);
      s = made.status();
    }
    Result<std::vector<std::string>> parts = GatherOutcomes(comm_, 0, s, part);
    if (!parts.ok() || rank_ != 0) return parts.status();
    Result<std::vector<uint8_t>> manifest = MergeParts(*parts, state_, opts_, data_end);
    return manifest.ok() ? WriteFrame(*file, data_end, *manifest, opts_.alignment)
                         : manifest.status();
  }

  // The temporary itself goes with target_ on rank 0, after every rank
  // closed it.
  Status Cleanup(const Status& s) const { return OfSaveTo(path_, s); }

  Communicator& comm_;
  const SharedFileOpener& open_;
  const std::string& path_;
  const RankState& state_;
  const SaveOptions& o_;
  FileSystem& fs_;
  SaveOptions opts_;  // o_, with its threads resolved for this rank
  const int rank_;
  const int size_;
  std::optional<AtomicFile> target_;  // rank 0
  bool extents_agreed_ = false;  // step 2 succeeded on every rank
};

}  // namespace

Status SaveToFile(Communicator& comm, const SharedFileOpener& open, const std::string& path,
                  const RankState& state, const SaveOptions& o, const Status& checked) {
  FileSave save(comm, open, path, state, o);
  return save.Run(checked);
}

}  // namespace rckpt::collective_save
