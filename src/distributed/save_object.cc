// The collective save to object storage: one multipart upload shared by
// the ranks (rckpt/file.h's shared writes) in place of the temporary file:
//   1. options and shard blocks checked, rank 0 starts the upload:
//      Introduce, with the upload's id, limits and marker;
//   2. every rank sizes its region (compressed chunks: encodes them into a
//      spill file in the machine's temporary directory): exchange the
//      sizes, from which every rank computes the same layout of parts
//      (part_layout.h);
//   3. every rank uploads its region, padded, as its own parts: gather the
//      manifest parts and the parts' ETags on rank 0, which uploads
//      manifest and footer as the last part and completes the upload;
//   4. agree.
// On any failure, a collective's included, every rank that knows the upload
// aborts it (an abort after the completion leaves the object).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "distributed/collective.h"
#include "distributed/part_layout.h"
#include "distributed/save_steps.h"
#include "format/layout.h"
#include "format/writer.h"
#include "io/atomic_write.h"

namespace rckpt::collective_save {
namespace {

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

class ObjectSave {
 public:
  ObjectSave(Communicator& comm, const std::string& path, const RankState& state,
             const SaveOptions& o)
      : comm_(comm), path_(path), state_(state), o_(o),
        fs_(o.fs != nullptr ? *o.fs : DefaultFileSystem()), rank_(comm.rank()),
        size_(comm.size()) {}

  Status Run(Status s) {
    // Step 1.
    std::optional<SharedWrite> write;
    if (s.ok() && rank_ == 0) {
      Result<SharedWrite> w = fs_.StartSharedWrite(path_);
      if (w.ok()) write = std::move(*w);
      s = w.status();
    }
    Result<Introduction> intro =
        Introduce(comm_, state_, o_, s,
                  {write ? write->id : "", write ? Limits(*write) : "", write ? write->marker : ""});
    if (!intro.ok()) return Abandon(write, intro.status());
    if (!write) {
      write = ParseLimits(intro->from_root[0], intro->from_root[1]);
      if (write) write->marker = intro->from_root[2];
    }
    if (!write) return Abandon(write, Malformed());
    write->replace = o_.replace;
    opts_ = intro->options;
    const LocalPlan& plan = intro->plan;

    // Step 2.
    const uint64_t start = rank_ == 0 ? kHeaderSize : 0;
    const bool raw = opts_.codec == Codec::kNone;
    const std::string spill = raw ? std::string() : TempPathFor(SpillBase());
    SpillRemover remove_spill{local_, spill};
    EncodedRegion region;
    uint64_t size = 0;
    Status sized;
    if (raw) {
      Result<uint64_t> end = RawRegionEnd(plan.sources, opts_, start);
      if (end.ok()) size = *end - start;
      sized = end.status();
    } else {
      sized = EncodeToSpill(local_, plan, opts_, spill, start, &region);
      size = region.end - start;
    }
    const uint64_t length = start + size;
    Result<std::vector<std::string>> lengths = AgreeAndAllGather(
        comm_, sized,
        std::string_view(reinterpret_cast<const char*>(&length),
                         sizeof length));
    if (!lengths.ok()) return Abandon(write, lengths.status());
    std::vector<uint64_t> by_rank;
    for (const std::string& l : *lengths) {
      uint64_t n = 0;
      if (l.size() != sizeof n)
        return Abandon(write, Status::IoError("size exchange: short"));
      std::memcpy(&n, l.data(), sizeof n);
      by_rank.push_back(n);
    }
    // Every rank computes the same layout, or the same error.
    Result<PartLayout> layout = LayOutParts(by_rank, opts_.alignment, *write);
    if (!layout.ok()) return Abandon(write, layout.status());
    const RankParts& mine = layout->ranks[rank_];

    // Step 3.
    std::string receipts;
    Status up = UploadRegion(*write, mine, plan, spill, start, size,
                             &region, &receipts);
    std::string payload;
    if (up.ok()) {
      Result<std::string> part =
          PartManifestOf(rank_, state_, plan, region, opts_, layout->data_end);
      if (part.ok()) {
        PutField(&payload, *part);
        PutField(&payload, receipts);
      }
      up = part.status();
    }
    Result<std::vector<std::string>> parts =
        GatherOutcomes(comm_, 0, up, payload);
    Status done = parts.status();
    if (parts.ok() && rank_ == 0)
      done = CompleteShared(*write, *layout, *parts);
    // Step 4. A rank lost after the parts were in (the agreement fails)
    // does not undo rank 0's completion: the object is the save's then, and
    // every rank that can tell so (rank 0; another rank finding the object
    // carrying the upload's marker) returns OK.
    Status agreed = Agree(comm_, done);
    if (!agreed.ok()) {
      if (done.ok() && (rank_ == 0 || CommittedAnyway(*write))) return Status::Ok();
      return Abandon(write, agreed);
    }
    return Status::Ok();
  }

 private:
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
  Status UploadRegion(const SharedWrite& write,
                      const RankParts& mine, const LocalPlan& plan,
                      const std::string& spill, uint64_t start, uint64_t size,
                      EncodedRegion* region, std::string* receipts) {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<SharedWriteRegion> out,
                           fs_.OpenSharedWriteRegion(
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
          local_, spill, start, size, [&](uint64_t, std::span<const std::byte> p) {
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
  Status CompleteShared(const SharedWrite& write,
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
        return Malformed();
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
    RCKPT_ASSIGN_OR_RETURN(std::vector<uint8_t> manifest,
                           MergeParts(manifests, state_, opts_, layout.data_end));
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
                           fs_.OpenSharedWriteRegion(path_, write, layout.last_part,
                                                    TailPartBytes(layout, tail.size())));
    RCKPT_RETURN_IF_ERROR(
        last->Append(std::as_bytes(std::span<const char>(tail))));
    RCKPT_ASSIGN_OR_RETURN(std::vector<SharedPart> parts, last->Finish());
    all.insert(all.end(), parts.begin(), parts.end());
    return fs_.CommitSharedWrite(path_, write, all);
  }

  // Whether rank 0 completed the upload (the object carries its marker).
  bool CommittedAnyway(const SharedWrite& write) {
    Result<bool> committed = fs_.SharedWriteCommitted(path_, write);
    return committed.ok() && *committed;
  }

  // The upload aborted by this rank (when it knows it), and `s` returned.
  Status Abandon(const std::optional<SharedWrite>& write,
                 const Status& s) {
    if (write) (void)fs_.AbortSharedWrite(path_, *write);
    return OfSaveTo(path_, s);
  }

  Communicator& comm_;
  const std::string& path_;
  const RankState& state_;
  const SaveOptions& o_;
  FileSystem& fs_;
  // The spill file's: a local path in the machine's temporary directory.
  FileSystem& local_ = DefaultFileSystem();
  SaveOptions opts_;  // o_, with its threads resolved for this rank
  const int rank_;
  const int size_;
};

}  // namespace

Status SaveToObject(Communicator& comm, const std::string& path, const RankState& state,
                    const SaveOptions& o, const Status& checked) {
  ObjectSave save(comm, path, state, o);
  return save.Run(checked);
}

}  // namespace rckpt::collective_save
