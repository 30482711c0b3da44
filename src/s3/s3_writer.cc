#include "s3/s3_writer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include "s3/xml.h"
#include "util/thread_pool.h"

namespace rckpt::s3 {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSizedParts = 8000;
constexpr uint64_t kPartsPerDoubling = 250;

// A part's bytes; never zero-filled.
struct PartBuffer {
  std::unique_ptr<std::byte[]> data;
  uint64_t capacity = 0;
  uint64_t used = 0;
};

// The ETag S3 gives a multipart object: the MD5 of the parts' MD5s, then
// "-<parts>". Empty when a part's ETag is not an MD5 (SSE-KMS, some
// servers).
std::string CompositeEtag(const std::vector<std::string>& etags) {
  std::vector<unsigned char> digests;
  for (const std::string& quoted : etags) {
    std::string e = quoted;
    if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
    if (e.size() != 32) return "";
    for (size_t i = 0; i < 32; i += 2) {
      unsigned v = 0;
      for (size_t k = i; k < i + 2; ++k) {
        const char c = e[k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return "";
        v = v * 16 + static_cast<unsigned>(d);
      }
      digests.push_back(static_cast<unsigned char>(v));
    }
  }
  unsigned char md5[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(digests.data(), digests.size(), md5, &n, EVP_md5(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[md5[i] >> 4]);
    out.push_back(kHex[md5[i] & 15]);
  }
  return out + "-" + std::to_string(etags.size()) + "\"";
}

// The ETag S3 gives an object put whole: its MD5, quoted.
std::string Md5Etag(std::span<const std::byte> body) {
  unsigned char md5[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(body.data(), body.size(), md5, &n, EVP_md5(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[md5[i] >> 4]);
    out.push_back(kHex[md5[i] & 15]);
  }
  return out + "\"";
}

class S3Writer final : public AtomicWritableFile {
 public:
  S3Writer(std::shared_ptr<S3Client> client, S3Url url, uint64_t expected_size, bool if_absent)
      : client_(std::move(client)),
        url_(std::move(url)),
        expected_(expected_size),
        if_absent_(if_absent),
        in_flight_max_(client_->options().upload_parts_in_flight) {}

  ~S3Writer() override {
    (void)Abort();
    pool_.reset();  // joins its threads before the state they use goes
  }

  Status Append(std::span<const std::byte> data) override {
    if (ended_) return Ended("append to");
    while (!data.empty()) {
      RCKPT_RETURN_IF_ERROR(FirstError());
      if (current_.data == nullptr) RCKPT_RETURN_IF_ERROR(NewCurrent());
      const uint64_t n = std::min<uint64_t>(data.size(), current_.capacity - current_.used);
      std::memcpy(current_.data.get() + current_.used, data.data(), n);
      current_.used += n;
      data = data.subspan(n);
      if (current_.used == current_.capacity) RCKPT_RETURN_IF_ERROR(SendCurrent());
    }
    return Status::Ok();
  }

  // The parts sent so far are uploaded (or one failed).
  Status Sync() override {
    if (ended_) return Ended("sync");
    WaitForParts(0);
    return FirstError();
  }

  Status Close() override { return ended_ ? Ended("close") : Status::Ok(); }

  Status Commit() override {
    if (ended_) return Ended("commit");
    Status s = FirstError();
    if (s.ok()) s = upload_id_.empty() ? PutWhole() : CompleteUpload();
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
    WaitForParts(0);
    current_ = PartBuffer{};
    if (upload_id_.empty()) return Status::Ok();
    S3Call c = UploadCall("AbortMultipartUpload", "DELETE");
    Result<HttpResponse> r = client_->Execute(c);
    if (!r.ok() && r.status().code() == StatusCode::kNotFound) return Status::Ok();
    return r.status();
  }

 private:
  S3Call UploadCall(const char* op, const char* method) const {
    S3Call c;
    c.op = op;
    c.method = method;
    c.bucket = url_.bucket;
    c.key = url_.key;
    c.query = {{"uploadId", upload_id_}};
    return c;
  }

  Status Ended(std::string_view op) const {
    return Status::InvalidArgument("cannot " + std::string(op) + " the upload of '" +
                                   url_.ToString() + "': it was committed or aborted");
  }

  Status FirstError() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Waits until at most `at_most` parts are in flight.
  void WaitForParts(int at_most) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ <= at_most; });
  }

  // The buffer for the next part: a returned one when it is large enough.
  Status NewCurrent() {
    const uint64_t want = PartBytes(etags_.size() + 1, expected_, client_->options().part_bytes);
    if (etags_.size() >= kMaxParts) {
      return Status::IoError("save to '" + url_.ToString() + "': more than " +
                             std::to_string(kMaxParts) +
                             " parts (S3's limit): give S3Options::part_bytes larger parts");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!spare_.empty()) {
        PartBuffer b = std::move(spare_.back());
        spare_.pop_back();
        if (b.capacity == want) {
          current_ = std::move(b);
          current_.used = 0;
          return Status::Ok();
        }
      }
    }
    current_.data.reset(new (std::nothrow) std::byte[want]);
    if (current_.data == nullptr) {
      return Status::OutOfMemory("save to '" + url_.ToString() + "': " + std::to_string(want) +
                                 " bytes of host memory for a part");
    }
    current_.capacity = want;
    current_.used = 0;
    return Status::Ok();
  }

  // Uploads the full current buffer as the next part, in the background.
  Status SendCurrent() {
    if (upload_id_.empty()) {
      S3Call c;
      c.op = "CreateMultipartUpload";
      c.method = "POST";
      c.bucket = url_.bucket;
      c.key = url_.key;
      c.query = {{"uploads", ""}};
      c.headers = EncryptionHeaders(client_->options());
      c.idempotent = false;
      RCKPT_ASSIGN_OR_RETURN(HttpResponse r, client_->Execute(c));
      Result<std::string> id = ParseUploadId(r.body);
      if (!id.ok()) {
        return id.status().WithContext("CreateMultipartUpload '" + url_.ToString() + "'");
      }
      upload_id_ = std::move(*id);
      pool_ = std::make_unique<ThreadPool>(in_flight_max_);
    }
    WaitForParts(in_flight_max_ - 1);
    RCKPT_RETURN_IF_ERROR(FirstError());
    const size_t index = etags_.size();
    auto part = std::make_shared<PartBuffer>(std::move(current_));
    current_ = PartBuffer{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      etags_.emplace_back();  // the parts in flight write their own entries
      ++in_flight_;
    }
    pool_->Submit([this, index, part] {
      S3Call c = UploadCall("UploadPart", "PUT");
      c.query.emplace_back("partNumber", std::to_string(index + 1));
      c.body = {part->data.get(), part->used};
      Result<HttpResponse> r = client_->Execute(c);
      Status s = r.status();
      std::string etag;
      if (r.ok()) {
        const std::string* e = r->Header("etag");
        if (e == nullptr || e->empty()) {
          s = Status::IoError("UploadPart '" + url_.ToString() + "' part " +
                              std::to_string(index + 1) + ": the answer carries no ETag");
        } else {
          etag = *e;
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      etags_[index] = std::move(etag);
      if (!s.ok() && error_.ok()) error_ = s;
      spare_.push_back(std::move(*part));
      --in_flight_;
      cv_.notify_all();
    });
    return Status::Ok();
  }

  // An object smaller than a part: one PutObject.
  Status PutWhole() {
    S3Call c;
    c.op = "PutObject";
    c.method = "PUT";
    c.bucket = url_.bucket;
    c.key = url_.key;
    c.headers = EncryptionHeaders(client_->options());
    c.body = {current_.data.get(), current_.used};
    c.if_none_match = if_absent_;
    Status s = client_->Execute(c).status();
    // A retried put finds the key taken when an earlier try wrote it and
    // its answer was lost: the object then has this body's MD5 as its ETag.
    if (s.code() == StatusCode::kAlreadyExists && HasEtag(Md5Etag(c.body))) s = Status::Ok();
    RCKPT_RETURN_IF_ERROR(s);
    current_ = PartBuffer{};
    return Status::Ok();
  }

  // Whether the object at url_ exists with ETag `expected` (never for "").
  bool HasEtag(const std::string& expected) {
    if (expected.empty()) return false;
    S3Call head;
    head.op = "HeadObject";
    head.method = "HEAD";
    head.bucket = url_.bucket;
    head.key = url_.key;
    Result<HttpResponse> h = client_->Execute(head);
    return h.ok() && h->Header("etag") != nullptr && *h->Header("etag") == expected;
  }

  Status CompleteUpload() {
    if (current_.used > 0) RCKPT_RETURN_IF_ERROR(SendCurrent());
    WaitForParts(0);
    RCKPT_RETURN_IF_ERROR(FirstError());
    const std::string body = CompleteMultipartUploadBody(etags_);
    S3Call c = UploadCall("CompleteMultipartUpload", "POST");
    c.body = std::as_bytes(std::span<const char>(body.data(), body.size()));
    c.body_sha256 = Sha256Hex(body);
    c.error_in_200 = true;
    c.if_none_match = if_absent_;
    Result<HttpResponse> r = client_->Execute(c);
    if (r.ok()) return Status::Ok();
    // A retried Complete finds no upload (or, conditional, the key taken)
    // when an earlier try completed it and its answer was lost: the object
    // with the parts' ETag is there.
    const bool lost_answer = (r.status().code() == StatusCode::kNotFound &&
                              r.status().message().find("NoSuchUpload") != std::string::npos) ||
                             r.status().code() == StatusCode::kAlreadyExists;
    if (lost_answer && HasEtag(CompositeEtag(etags_))) {
      upload_id_.clear();  // nothing left to abort
      return Status::Ok();
    }
    return r.status();
  }

  const std::shared_ptr<S3Client> client_;
  const S3Url url_;
  const uint64_t expected_;
  const bool if_absent_;
  const int in_flight_max_;

  std::string upload_id_;
  PartBuffer current_;
  std::vector<std::string> etags_;  // one per part sent; filled as they finish
  std::unique_ptr<ThreadPool> pool_;
  bool ended_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;              // guarded by mu_
  Status error_;                   // guarded by mu_: the first part's failure
  std::vector<PartBuffer> spare_;  // guarded by mu_
};

}  // namespace

uint64_t PartBytes(uint64_t number, uint64_t expected_size, uint64_t fixed) {
  if (fixed != 0) return fixed;
  uint64_t base = (expected_size + kSizedParts - 1) / kSizedParts;
  base = std::max(kDefaultPartBytes, (base + kMiB - 1) / kMiB * kMiB);
  if (number > kSizedParts) {
    const uint64_t doublings =
        std::min<uint64_t>((number - kSizedParts - 1) / kPartsPerDoubling + 1, 30);
    base = base >= (kMaxPartBytes >> doublings) ? kMaxPartBytes : base << doublings;
  }
  return std::min(base, kMaxPartBytes);
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
