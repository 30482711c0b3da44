#include "s3/s3_writer.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <random>
#include <vector>

#include "s3/xml.h"
#include "util/crc32c.h"
#include "util/hex.h"
#include "util/thread_pool.h"

namespace rckpt::s3 {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSizedParts = 8000;
// The first buffer of a write starts this small and grows to the part's
// size as bytes come: an object smaller than a part takes its own size.
constexpr uint64_t kFirstBufferBytes = 8 * kMiB;

// A part's bytes; never zero-filled. `crc` is the CRC-32C of the bytes
// used, kept as they are copied in.
struct PartBuffer {
  std::unique_ptr<std::byte[]> data;
  uint64_t capacity = 0;
  uint64_t used = 0;
  uint64_t size = 0;  // the part's size: capacity grows to it
  uint32_t crc = 0;
};

// The checksum header S3 verifies a body against: a body damaged on the
// way is refused (400 BadDigest), never stored.
constexpr char kCrc32cHeader[] = "x-amz-checksum-crc32c";

// Parts uploaded in the background, at most `in_flight_max` at a time, each
// reporting its ETag; the buffers of finished parts are kept for reuse.
class PartUploads {
 public:
  PartUploads(std::shared_ptr<S3Client> client, const S3Url& url,
              int in_flight_max)
      : client_(std::move(client)), url_(url), in_flight_max_(in_flight_max) {}

  ~PartUploads() {
    Wait(0);
    pool_.reset();  // joins its threads before the state they use goes
  }

  // The upload the parts go to; set before the first Send.
  void SetUploadId(std::string id) {
    upload_id_ = std::move(id);
    if (pool_ == nullptr) pool_ = std::make_unique<ThreadPool>(in_flight_max_);
  }

  S3Call UploadCall(const char* op, const char* method) const {
    S3Call c;
    c.op = op;
    c.method = method;
    c.bucket = url_.bucket;
    c.key = url_.key;
    c.query = {{"uploadId", upload_id_}};
    return c;
  }

  Status FirstError() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Waits until at most `at_most` parts are in flight.
  void Wait(int at_most) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ <= at_most; });
  }

  // A buffer for a part of `size` bytes: a returned one when it has that
  // size, else a new one of `capacity` bytes (at most `size`; it grows).
  Result<PartBuffer> Buffer(uint64_t size, uint64_t capacity) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!spare_.empty()) {
        PartBuffer b = std::move(spare_.back());
        spare_.pop_back();
        if (b.capacity == size) {
          b.used = 0;
          b.size = size;
          b.crc = 0;
          return b;
        }
      }
    }
    PartBuffer b;
    RCKPT_RETURN_IF_ERROR(Allocate(&b, std::min(size, capacity)));
    b.size = size;
    return b;
  }

  // Gives `b` a larger buffer of `capacity` bytes, its bytes kept.
  Status Grow(PartBuffer* b, uint64_t capacity) {
    PartBuffer larger;
    RCKPT_RETURN_IF_ERROR(Allocate(&larger, capacity));
    std::memcpy(larger.data.get(), b->data.get(), b->used);
    b->data = std::move(larger.data);
    b->capacity = capacity;
    return Status::Ok();
  }

  // Uploads `part` as part `number` in the background, once fewer than
  // in_flight_max parts are in flight; its ETag goes to etags()[number -
  // first].
  Status Send(uint64_t number, PartBuffer part, uint64_t first = 1) {
    Wait(in_flight_max_ - 1);
    RCKPT_RETURN_IF_ERROR(FirstError());
    const size_t index = number - first;
    auto shared = std::make_shared<PartBuffer>(std::move(part));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (etags_.size() <= index) {
        etags_.resize(index + 1);
        crc32cs_.resize(index + 1);
      }
      crc32cs_[index] = Crc32cBase64(shared->crc);
      ++in_flight_;
    }
    pool_->Submit([this, number, index, shared] {
      S3Call c = UploadCall("UploadPart", "PUT");
      c.query.emplace_back("partNumber", std::to_string(number));
      c.headers.emplace_back(kCrc32cHeader, Crc32cBase64(shared->crc));
      c.body = {shared->data.get(), shared->used};
      Result<HttpResponse> r = client_->Execute(c);
      Status s = r.status();
      std::string etag;
      if (r.ok()) {
        const std::string* e = r->Header("etag");
        if (e == nullptr || e->empty()) {
          s = Status::IoError("UploadPart '" + url_.ToString() + "' part " +
                              std::to_string(number) +
                              ": the answer carries no ETag");
        } else {
          etag = *e;
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      etags_[index] = std::move(etag);
      if (!s.ok() && error_.ok()) error_ = s;
      spare_.push_back(std::move(*shared));
      --in_flight_;
      cv_.notify_all();
    });
    return Status::Ok();
  }

  // The ETags and CRC-32Cs (base64) of the parts sent, once Wait(0)
  // returned.
  const std::vector<std::string>& etags() const { return etags_; }
  const std::vector<std::string>& crc32cs() const { return crc32cs_; }
  size_t sent() const { return etags_.size(); }
  const std::string& upload_id() const { return upload_id_; }
  void ForgetUpload() { upload_id_.clear(); }
  S3Client& client() const { return *client_; }

 private:
  const std::shared_ptr<S3Client> client_;
  const S3Url url_;
  const int in_flight_max_;
  std::string upload_id_;
  std::unique_ptr<ThreadPool> pool_;

  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;               // guarded by mu_
  Status error_;                    // guarded by mu_: the first part's failure
  std::vector<PartBuffer> spare_;   // guarded by mu_
  std::vector<std::string> etags_;  // guarded by mu_ while parts are in flight
  std::vector<std::string> crc32cs_;  // as etags_

  Status Allocate(PartBuffer* b, uint64_t capacity) {
    b->data.reset(new (std::nothrow) std::byte[capacity]);
    if (b->data == nullptr) {
      return Status::OutOfMemory("save to '" + url_.ToString() + "': " +
                                 std::to_string(capacity) + " bytes of host memory for a part");
    }
    b->capacity = capacity;
    return Status::Ok();
  }
};

// Whether a write that failed made its object all the same (an answer lost).
bool MadeAllTheSame(S3Client& client, const S3Url& url, const std::string& marker) {
  Result<bool> mine = HasMarker(client, url, marker);
  return mine.ok() && *mine;
}

// Copies `data` into `*current` (a buffer from `buffer()` when it has
// none; grown by `parts` while smaller than its part), its CRC-32C
// computed as the bytes are copied, and calls `send` each time a part is
// full.
template <typename BufferFn, typename SendFn>
Status FillParts(std::span<const std::byte> data, PartBuffer* current, PartUploads& parts,
                 BufferFn&& buffer, SendFn&& send) {
  while (!data.empty()) {
    if (current->data == nullptr) {
      RCKPT_ASSIGN_OR_RETURN(*current, buffer());
    }
    if (current->used == current->capacity) {
      RCKPT_RETURN_IF_ERROR(
          parts.Grow(current, std::min(current->size, 2 * current->capacity)));
    }
    const uint64_t n =
        std::min<uint64_t>(data.size(), current->capacity - current->used);
    current->crc =
        CopyWithCrc32c(current->data.get() + current->used, data.first(n), current->crc);
    current->used += n;
    data = data.subspan(n);
    if (current->used == current->size) RCKPT_RETURN_IF_ERROR(send());
  }
  return Status::Ok();
}

class S3Writer final : public AtomicWritableFile {
 public:
  S3Writer(std::shared_ptr<S3Client> client, S3Url url, uint64_t expected_size, bool if_absent)
      : url_(std::move(url)),
        if_absent_(if_absent),
        marker_(NewUploadMarker()),
        part_bytes_(PartBytes(expected_size, client->options().part_bytes)),
        parts_(client, url_, PartsInFlight(client->options(), part_bytes_)) {}

  ~S3Writer() override { (void)Abort(); }

  Status Append(std::span<const std::byte> data) override {
    if (ended_) return Ended("append to");
    RCKPT_RETURN_IF_ERROR(parts_.FirstError());
    return FillParts(
        data, &current_, parts_, [&] { return NewBuffer(); },
        [&] { return SendCurrent(); });
  }

  // The parts sent so far are uploaded (or one failed).
  Status Sync() override {
    if (ended_) return Ended("sync");
    parts_.Wait(0);
    return parts_.FirstError();
  }

  Status Close() override { return ended_ ? Ended("close") : Status::Ok(); }

  Status Commit() override {
    if (ended_) return Ended("commit");
    Status s = parts_.FirstError();
    if (s.ok()) s = parts_.upload_id().empty() ? PutWhole() : CompleteUpload();
    if (!s.ok()) {
      (void)Abort();
      return s;
    }
    ended_ = true;
    return s;
  }

  Status Abort() override {
    if (ended_) return Status::Ok();
    ended_ = true;
    parts_.Wait(0);
    current_ = PartBuffer{};
    if (parts_.upload_id().empty()) return Status::Ok();
    return AbortUpload(parts_.client(), url_, parts_.upload_id());
  }

 private:
  Status Ended(std::string_view op) const {
    return Status::InvalidArgument("cannot " + std::string(op) +
                                   " the upload of '" + url_.ToString() +
                                   "': it was committed or aborted");
  }

  Result<PartBuffer> NewBuffer() {
    if (parts_.sent() >= kMaxParts) {
      return Status::IoError(
          "save to '" + url_.ToString() + "': more than " +
          std::to_string(kMaxParts) +
          " parts (S3's limit): give S3Options::part_bytes larger parts");
    }
    // Past the first part the size is known to be reached: whole parts.
    return parts_.Buffer(part_bytes_,
                         parts_.sent() == 0 ? kFirstBufferBytes : part_bytes_);
  }

  // Uploads the full current buffer as the next part, in the background.
  Status SendCurrent() {
    if (parts_.upload_id().empty()) {
      RCKPT_ASSIGN_OR_RETURN(std::string id,
                             CreateUpload(parts_.client(), url_, marker_));
      parts_.SetUploadId(std::move(id));
    }
    PartBuffer part = std::move(current_);
    current_ = PartBuffer{};
    return parts_.Send(parts_.sent() + 1, std::move(part));
  }

  // An object smaller than a part: one PutObject.
  Status PutWhole() {
    S3Call c;
    c.op = "PutObject";
    c.method = "PUT";
    c.bucket = url_.bucket;
    c.key = url_.key;
    c.headers = EncryptionHeaders(parts_.client().options());
    c.headers.emplace_back(kMarkerHeader, marker_);
    c.headers.emplace_back(kCrc32cHeader, Crc32cBase64(current_.crc));
    c.headers.emplace_back("content-type", kObjectContentType);
    c.body = {current_.data.get(), current_.used};
    c.if_none_match = if_absent_;
    Status s = parts_.client().Execute(c).status();
    // A try whose answer was lost may have written the object: a retry then
    // finds the key taken (412), or the tries end in errors. The object
    // carrying this write's marker says it did.
    if (!s.ok() && MadeAllTheSame(parts_.client(), url_, marker_)) s = Status::Ok();
    RCKPT_RETURN_IF_ERROR(s);
    current_ = PartBuffer{};
    return Status::Ok();
  }

  Status CompleteUpload() {
    if (current_.used > 0) RCKPT_RETURN_IF_ERROR(SendCurrent());
    parts_.Wait(0);
    RCKPT_RETURN_IF_ERROR(parts_.FirstError());
    Status s = CompleteParts(parts_.client(), url_, parts_.upload_id(),
                             parts_.etags(), parts_.crc32cs(), marker_, if_absent_);
    if (s.ok()) parts_.ForgetUpload();  // nothing left to abort
    return s;
  }

  const S3Url url_;
  const bool if_absent_;
  const std::string marker_;  // this write's identity (kMarkerHeader)
  const uint64_t part_bytes_;  // every part's but the last
  PartUploads parts_;
  PartBuffer current_;
  bool ended_ = false;
};

// A process's parts of a shared write (rckpt/file.h): part `first_` on, of
// the sizes planned.
class S3RegionWriter final : public SharedWriteRegion {
 public:
  S3RegionWriter(std::shared_ptr<S3Client> client, S3Url url,
                 std::string upload_id, uint64_t first_part,
                 std::vector<uint64_t> sizes)
      : url_(std::move(url)),
        first_(first_part),
        sizes_(std::move(sizes)),
        parts_(client, url_,
               PartsInFlight(client->options(),
                             sizes_.empty() ? 0 : *std::max_element(sizes_.begin(), sizes_.end()))) {
    parts_.SetUploadId(std::move(upload_id));
  }

  Status Append(std::span<const std::byte> data) override {
    if (finished_)
      return Status::InvalidArgument("append to a finished region");
    RCKPT_RETURN_IF_ERROR(parts_.FirstError());
    return FillParts(
        data, &current_, parts_,
        [&]() -> Result<PartBuffer> {
          if (parts_.sent() >= sizes_.size()) {
            return Status::InvalidArgument(
                "shared write to '" + url_.ToString() +
                "': more bytes than parts " + std::to_string(first_) + " to " +
                std::to_string(first_ + sizes_.size() - 1) + " hold");
          }
          const uint64_t size = sizes_[parts_.sent()];
          return parts_.Buffer(size, size);
        },
        [&] { return SendCurrent(); });
  }

  Status Sync() override { return Status::Ok(); }
  Status Close() override { return Status::Ok(); }

  Result<std::vector<SharedPart>> Finish() override {
    finished_ = true;
    const bool short_last = current_.data != nullptr && current_.used > 0 &&
                            parts_.sent() + 1 == sizes_.size();
    if (short_last) RCKPT_RETURN_IF_ERROR(SendCurrent());
    parts_.Wait(0);
    RCKPT_RETURN_IF_ERROR(parts_.FirstError());
    if (parts_.sent() != sizes_.size()) {
      return Status::InvalidArgument(
          "shared write to '" + url_.ToString() + "': parts " +
          std::to_string(first_) + " on were given " +
          std::to_string(parts_.sent()) + " of their " +
          std::to_string(sizes_.size()) + " parts' bytes");
    }
    std::vector<SharedPart> out;
    for (size_t i = 0; i < parts_.etags().size(); ++i) {
      out.push_back(SharedPart{first_ + i, parts_.etags()[i], parts_.crc32cs()[i]});
    }
    return out;
  }

 private:
  Status SendCurrent() {
    PartBuffer part = std::move(current_);
    current_ = PartBuffer{};
    return parts_.Send(first_ + parts_.sent(), std::move(part), first_);
  }

  const S3Url url_;
  const uint64_t first_;
  const std::vector<uint64_t> sizes_;
  PartUploads parts_;
  PartBuffer current_;
  bool finished_ = false;
};

}  // namespace

uint64_t PartBytes(uint64_t expected_size, uint64_t fixed) {
  if (fixed != 0) return fixed;
  if (expected_size == 0) return kUnknownSizePartBytes;
  uint64_t base = (expected_size + kSizedParts - 1) / kSizedParts;
  base = std::max(kDefaultPartBytes, (base + kMiB - 1) / kMiB * kMiB);
  return std::min(base, kMaxPartBytes);
}

int PartsInFlight(const S3Options& options, uint64_t part_bytes) {
  const uint64_t fit = part_bytes == 0 ? 0 : options.upload_buffer_bytes / part_bytes;
  const uint64_t in_flight = fit > 1 ? fit - 1 : 1;
  return static_cast<int>(
      std::min<uint64_t>(in_flight, static_cast<uint64_t>(options.upload_parts_in_flight)));
}

std::string NewUploadMarker() {
  // The system's entropy: markers of writes anywhere never meet.
  std::random_device random;
  std::string out;
  for (int i = 0; i < 4; ++i) out += HexDigits(random(), 8);
  return out;
}

Result<bool> HasMarker(S3Client& client, const S3Url& url, const std::string& marker) {
  S3Call head;
  head.op = "HeadObject";
  head.method = "HEAD";
  head.bucket = url.bucket;
  head.key = url.key;
  Result<HttpResponse> h = client.Execute(head);
  if (!h.ok()) {
    if (h.status().code() == StatusCode::kNotFound) return false;
    return h.status();
  }
  const std::string* got = h->Header(kMarkerHeader);
  return got != nullptr && *got == marker;
}


Result<std::string> CreateUpload(S3Client& client, const S3Url& url,
                                 const std::string& marker) {
  S3Call c;
  c.op = "CreateMultipartUpload";
  c.method = "POST";
  c.bucket = url.bucket;
  c.key = url.key;
  c.query = {{"uploads", ""}};
  c.headers = EncryptionHeaders(client.options());
  c.headers.emplace_back(kMarkerHeader, marker);
  // The object's type; without it the request's own (XML) would be kept.
  c.headers.emplace_back("content-type", kObjectContentType);
  // The parts carry their CRC-32C; S3 takes them only for an upload created
  // for that algorithm, and then wants them again in the Complete.
  c.headers.emplace_back("x-amz-checksum-algorithm", "CRC32C");
  // Sent again after a 500 or a lost answer, as the AWS SDKs do: at worst an
  // empty upload is left, which `rckpt incomplete` or a lifecycle rule ends.
  RCKPT_ASSIGN_OR_RETURN(HttpResponse r, client.Execute(c));
  Result<std::string> id = ParseUploadId(r.body);
  if (!id.ok())
    return id.status().WithContext("CreateMultipartUpload '" + url.ToString() +
                                   "'");
  return id;
}

Status CompleteParts(S3Client& client, const S3Url& url,
                     const std::string& upload_id,
                     const std::vector<std::string>& etags,
                     const std::vector<std::string>& crc32cs,
                     const std::string& marker, bool if_none_match) {
  const std::string body = CompleteMultipartUploadBody(etags, crc32cs);
  S3Call c;
  c.op = "CompleteMultipartUpload";
  c.method = "POST";
  c.bucket = url.bucket;
  c.key = url.key;
  c.query = {{"uploadId", upload_id}};
  c.body = std::as_bytes(std::span<const char>(body.data(), body.size()));
  c.body_sha256 = Sha256Hex(body);
  c.error_in_200 = true;
  c.if_none_match = if_none_match;
  Result<HttpResponse> r = client.Execute(c);
  if (r.ok()) return Status::Ok();
  // A try that completed the upload may have lost its answer: the retry then
  // finds no upload (404 NoSuchUpload; Ceph RGW answers 500, retried to the
  // end) or, conditional, the key taken (412). Whatever the error, the
  // object carrying this upload's marker says the upload completed; its
  // ETag cannot (not an MD5 of anything on GCS, with SSE-KMS or SSE-C).
  if (MadeAllTheSame(client, url, marker)) return Status::Ok();
  return r.status();
}

Status AbortUpload(S3Client& client, const S3Url& url,
                   const std::string& upload_id) {
  S3Call c;
  c.op = "AbortMultipartUpload";
  c.method = "DELETE";
  c.bucket = url.bucket;
  c.key = url.key;
  c.query = {{"uploadId", upload_id}};
  Result<HttpResponse> r = client.Execute(c);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound)
    return Status::Ok();
  return r.status();
}

std::unique_ptr<SharedWriteRegion> NewS3RegionWriter(
    std::shared_ptr<S3Client> client, S3Url url, std::string upload_id,
    uint64_t first_part, std::vector<uint64_t> part_bytes) {
  return std::make_unique<S3RegionWriter>(std::move(client), std::move(url),
                                          std::move(upload_id), first_part,
                                          std::move(part_bytes));
}

std::unique_ptr<AtomicWritableFile> NewS3Writer(std::shared_ptr<S3Client> client, S3Url url,
                                                uint64_t expected_size, bool if_absent) {
  return std::make_unique<S3Writer>(std::move(client), std::move(url), expected_size, if_absent);
}

KeyValues EncryptionHeaders(const S3Options& options) {
  switch (options.encryption) {
    case S3Encryption::kBucketDefault:
      return {};
    case S3Encryption::kS3:
      return {{"x-amz-server-side-encryption", "AES256"}};
    case S3Encryption::kKms: {
      KeyValues h = {{"x-amz-server-side-encryption", "aws:kms"}};
      if (!options.kms_key_id.empty()) {
        h.emplace_back("x-amz-server-side-encryption-aws-kms-key-id", options.kms_key_id);
      }
      return h;
    }
  }
  return {};
}

}  // namespace rckpt::s3
