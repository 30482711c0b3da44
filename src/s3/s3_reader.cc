#include "s3/s3_reader.h"

#include <charconv>
#include <cstring>
#include <vector>

#include "s3/xml.h"

namespace rckpt::s3 {
namespace {

// "bytes FIRST-LAST/TOTAL".
bool ParseContentRange(const std::string& v, uint64_t* first, uint64_t* last, uint64_t* total) {
  if (!v.starts_with("bytes ")) return false;
  const char* p = v.data() + 6;
  const char* end = v.data() + v.size();
  auto num = [&](uint64_t* out, char stop) {
    auto [q, ec] = std::from_chars(p, end, *out);
    if (ec != std::errc() || (stop != 0 && (q == end || *q != stop))) return false;
    p = q + (stop != 0 ? 1 : 0);
    return stop != 0 || q == end;
  };
  return num(first, '-') && num(last, '/') && num(total, 0) && *first <= *last && *last < *total;
}

class S3ReadFile final : public RandomAccessFile {
 public:
  S3ReadFile(std::shared_ptr<S3Client> client, S3Url url, uint64_t size, std::string etag,
             std::vector<std::byte> tail)
      : client_(std::move(client)),
        url_(std::move(url)),
        size_(size),
        etag_(std::move(etag)),
        tail_(std::move(tail)),
        tail_offset_(size_ - tail_.size()) {}

  uint64_t Size() const override { return size_; }
  int ReadConcurrency() const override { return client_->options().max_requests; }

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    const ReadRange range{offset, dst};
    return ReadRanges({&range, 1});
  }

  Status ReadRanges(std::span<const ReadRange> ranges) const override {
    std::vector<S3Call> calls;
    for (const ReadRange& r : ranges) {
      if (r.offset > size_ || r.dst.size() > size_ - r.offset) {
        return Status::Corruption("read '" + url_.ToString() + "' at offset " +
                                  std::to_string(r.offset) + ": " + std::to_string(r.dst.size()) +
                                  " bytes asked for, the object " + "has " + std::to_string(size_) +
                                  " (truncated)");
      }
      if (r.dst.empty()) continue;
      if (r.offset >= tail_offset_) {
        std::memcpy(r.dst.data(), tail_.data() + (r.offset - tail_offset_), r.dst.size());
        continue;
      }
      for (uint64_t done = 0; done < r.dst.size(); done += kReadPieceBytes) {
        const uint64_t n = std::min<uint64_t>(kReadPieceBytes, r.dst.size() - done);
        calls.push_back(RangeCall(r.offset + done, r.dst.subspan(done, n)));
      }
    }
    if (calls.empty()) return Status::Ok();
    if (calls.size() == 1) return client_->Execute(calls[0]).status();
    return client_->ExecuteAll(calls);
  }

 private:
  S3Call RangeCall(uint64_t offset, std::span<std::byte> dst) const {
    S3Call c;
    c.op = "GetObject";
    c.bucket = url_.bucket;
    c.key = url_.key;
    c.headers = {{"range", "bytes=" + std::to_string(offset) + "-" +
                               std::to_string(offset + dst.size() - 1)},
                 {"if-match", etag_}};
    c.into = dst;
    c.exact = true;
    c.precondition_failed = std::string("'")
                                .append(url_.ToString())
                                .append("' was replaced while it was being read (its ETag was ")
                                .append(etag_)
                                .append(" at the first read): read it again");
    return c;
  }

  const std::shared_ptr<S3Client> client_;
  const S3Url url_;
  const uint64_t size_;
  const std::string etag_;
  const std::vector<std::byte> tail_;
  const uint64_t tail_offset_;
};

}  // namespace

Result<bool> PrefixHasObjects(S3Client& client, const std::string& bucket,
                              const std::string& prefix) {
  S3Call c;
  c.op = "ListObjectsV2";
  c.bucket = bucket;
  c.query = {{"list-type", "2"}, {"max-keys", "1"}, {"prefix", prefix}};
  RCKPT_ASSIGN_OR_RETURN(HttpResponse r, client.Execute(c));
  RCKPT_ASSIGN_OR_RETURN(ObjectPage page, ParseObjectPage(r.body));
  return !page.objects.empty() || !page.prefixes.empty();
}

Result<std::unique_ptr<RandomAccessFile>> OpenS3Object(std::shared_ptr<S3Client> client,
                                                       const S3Url& url) {
  std::vector<std::byte> tail(kTailBytes);
  S3Call c;
  c.op = "GetObject";
  c.bucket = url.bucket;
  c.key = url.key;
  c.headers = {{"range", "bytes=-" + std::to_string(kTailBytes)}};
  c.into = tail;
  c.answers = {416};  // an empty object has no last bytes to range over
  Result<HttpResponse> got = client->Execute(c);
  if (!got.ok()) {
    if (got.status().code() == StatusCode::kNotFound) {
      // A key that is a prefix of others is a "directory": say so.
      Result<bool> dir =
          PrefixHasObjects(*client, url.bucket, url.key.ends_with('/') ? url.key : url.key + "/");
      if (dir.ok() && *dir) {
        return Status::InvalidArgument("open '" + url.ToString() +
                                       "': expected an object, found a prefix of other objects "
                                       "(a directory)");
      }
    }
    return got.status();
  }
  if (got->status == 416) {
    S3Call head;
    head.op = "HeadObject";
    head.method = "HEAD";
    head.bucket = url.bucket;
    head.key = url.key;
    RCKPT_ASSIGN_OR_RETURN(HttpResponse h, client->Execute(head));
    const std::string* etag = h.Header("etag");
    return std::unique_ptr<RandomAccessFile>(std::make_unique<S3ReadFile>(
        std::move(client), url, 0, etag ? *etag : "", std::vector<std::byte>()));
  }
  HttpResponse& r = *got;
  const std::string* etag = r.Header("etag");
  if (etag == nullptr || etag->empty()) {
    return Status::IoError("GetObject '" + url.ToString() +
                           "': the answer carries no ETag, so a replacement during the read "
                           "could not be detected");
  }
  uint64_t size = r.into_bytes;
  uint64_t first = 0, last = 0;
  if (r.status == 206) {
    const std::string* range = r.Header("content-range");
    if (range == nullptr || !ParseContentRange(*range, &first, &last, &size) || last + 1 != size ||
        last - first + 1 != r.into_bytes) {
      return Status::IoError("GetObject '" + url.ToString() + "': the answer's Content-Range '" +
                             (range ? *range : "") + "' does not match the last " +
                             std::to_string(r.into_bytes) + " bytes sent");
    }
  }
  tail.resize(static_cast<size_t>(r.into_bytes));
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<S3ReadFile>(std::move(client), url, size, *etag, std::move(tail)));
}

}  // namespace rckpt::s3
