#include "s3/s3_file_system.h"

#include <algorithm>

#include "io/url_file_system.h"
#include "rckpt/s3.h"
#include "s3/aws_config.h"
#include "s3/credentials.h"
#include "s3/s3_reader.h"
#include "s3/s3_writer.h"
#include "s3/url.h"
#include "s3/xml.h"

namespace rckpt::s3 {
namespace {

// A plain WritableFile over an S3 write: Close makes the object.
class CommitOnClose final : public WritableFile {
 public:
  explicit CommitOnClose(std::unique_ptr<AtomicWritableFile> w) : w_(std::move(w)) {}
  Status Append(std::span<const std::byte> data) override { return w_->Append(data); }
  Status Sync() override { return w_->Sync(); }
  Status Close() override { return w_->Commit(); }

 private:
  std::unique_ptr<AtomicWritableFile> w_;
};

class S3FileSystem final : public FileSystem {
 public:
  explicit S3FileSystem(std::shared_ptr<S3Client> client) : client_(std::move(client)) {}

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    return OpenS3Object(client_, url);
  }

  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicWritableFile> w, OpenForAtomicWrite(path, 0));
    return std::unique_ptr<WritableFile>(std::make_unique<CommitOnClose>(std::move(w)));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    return Status::Unsupported("rename '" + from + "' to '" + to +
                               "': object storage has no rename (an S3 write replaces its "
                               "object atomically by itself)");
  }

  Status Remove(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    S3Call c;
    c.op = "DeleteObject";
    c.method = "DELETE";
    c.bucket = url.bucket;
    c.key = url.key;
    return client_->Execute(c).status();
  }

  Status SyncParentDir(const std::string& /*path*/) override { return Status::Ok(); }

  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(dir, UrlKind::kPrefix));
    std::string prefix = url.key;
    if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
    std::vector<std::string> names;
    RCKPT_RETURN_IF_ERROR(ForEachPage(url.bucket, prefix, "/", [&](const ObjectPage& page) {
      for (const ListedObject& o : page.objects) {
        if (o.key.size() > prefix.size()) names.push_back(o.key.substr(prefix.size()));
      }
      for (const std::string& p : page.prefixes) {
        std::string name = p.substr(prefix.size());
        if (name.ends_with('/')) name.pop_back();
        if (!name.empty()) names.push_back(std::move(name));
      }
    }));
    if (names.empty() && !prefix.empty()) {
      return Status::NotFound("list '" + dir + "': no object has the prefix '" + prefix + "'");
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }

  bool Exists(const std::string& path) override {
    Result<S3Url> url = ParseS3Url(path, UrlKind::kPrefix);
    if (!url.ok()) return false;
    if (!url->key.empty()) {
      S3Call c;
      c.op = "HeadObject";
      c.method = "HEAD";
      c.bucket = url->bucket;
      c.key = url->key;
      if (client_->Execute(c).ok()) return true;
    }
    std::string prefix = url->key;
    if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
    Result<bool> dir = PrefixHasObjects(*client_, url->bucket, prefix);
    return dir.ok() && *dir;
  }

  Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicWrite(const std::string& path,
                                                                 uint64_t expected_size) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    return NewS3Writer(client_, std::move(url), expected_size);
  }

  Result<std::unique_ptr<AtomicWritableFile>> OpenForAtomicCreate(
      const std::string& path, uint64_t expected_size) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    return NewS3Writer(client_, std::move(url), expected_size, /*if_absent=*/true);
  }

  Status RenameNoReplace(const std::string& from, const std::string& to) override {
    return Rename(from, to);
  }

  Result<std::vector<FileInfo>> List(const std::string& prefix) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(prefix, UrlKind::kPrefix));
    std::vector<FileInfo> out;
    RCKPT_RETURN_IF_ERROR(ForEachPage(url.bucket, url.key, "", [&](const ObjectPage& page) {
      for (const ListedObject& o : page.objects) {
        out.push_back(FileInfo{"s3://" + url.bucket + "/" + o.key, o.size, o.modified_unix_ms});
      }
    }));
    std::sort(out.begin(), out.end(),
              [](const FileInfo& a, const FileInfo& b) { return a.path < b.path; });
    return out;
  }

  Result<std::vector<IncompleteWrite>> ListIncomplete(const std::string& prefix) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(prefix, UrlKind::kPrefix));
    std::vector<IncompleteWrite> out;
    std::string key_marker, id_marker;
    for (;;) {
      S3Call c;
      c.op = "ListMultipartUploads";
      c.bucket = url.bucket;
      c.query = {{"uploads", ""}, {"prefix", url.key}};
      if (!key_marker.empty()) c.query.emplace_back("key-marker", key_marker);
      if (!id_marker.empty()) c.query.emplace_back("upload-id-marker", id_marker);
      RCKPT_ASSIGN_OR_RETURN(HttpResponse r, client_->Execute(c));
      Result<UploadPage> page = ParseUploadPage(r.body);
      if (!page.ok()) return page.status().WithContext("ListMultipartUploads '" + prefix + "'");
      for (const ListedUpload& u : page->uploads) {
        // Some servers ignore the prefix.
        if (!u.key.starts_with(url.key)) continue;
        out.push_back(IncompleteWrite{"s3://" + url.bucket + "/" + u.key, u.upload_id,
                                      u.initiated_unix_ms, false});
      }
      if (!page->truncated ||
          (page->next_key_marker == key_marker && page->next_upload_id_marker == id_marker)) {
        break;
      }
      key_marker = page->next_key_marker;
      id_marker = page->next_upload_id_marker;
    }
    return out;
  }

  Status AbortIncomplete(const IncompleteWrite& write) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(write.path));
    S3Call c;
    c.op = "AbortMultipartUpload";
    c.method = "DELETE";
    c.bucket = url.bucket;
    c.key = url.key;
    c.query = {{"uploadId", write.id}};
    return client_->Execute(c).status();
  }

  Result<SharedWrite> StartSharedWrite(const std::string& path) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    std::string marker = NewUploadMarker();
    RCKPT_ASSIGN_OR_RETURN(std::string id, CreateUpload(*client_, url, marker));
    return SharedWrite{std::move(id), kMinPartBytes, kMaxPartBytes, kMaxParts, std::move(marker)};
  }

  Result<std::unique_ptr<SharedWriteRegion>> OpenSharedWriteRegion(
      const std::string& path, const SharedWrite& write, uint64_t first_part,
      std::vector<uint64_t> part_bytes) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    const uint64_t end = first_part + part_bytes.size();
    if (first_part < 1 || end - 1 > kMaxParts) {
      return Status::InvalidArgument(
          "shared write to '" + path + "': parts " +
          std::to_string(first_part) + " to " + std::to_string(end - 1) +
          " are outside S3's 1 to " + std::to_string(kMaxParts));
    }
    for (uint64_t n : part_bytes) {
      if (n == 0 || n > kMaxPartBytes) {
        return Status::InvalidArgument(
            "shared write to '" + path + "': a part of " + std::to_string(n) +
            " bytes (S3 takes 1 to " + std::to_string(kMaxPartBytes) + ")");
      }
    }
    return NewS3RegionWriter(client_, std::move(url), write.id, first_part,
                             std::move(part_bytes));
  }

  Status CommitSharedWrite(const std::string& path, const SharedWrite& write,
                           std::span<const SharedPart> parts) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    std::vector<std::string> etags, crc32cs;
    for (const SharedPart& p : parts) {
      if (p.number != etags.size() + 1) {
        return Status::InvalidArgument(
            "shared write to '" + path + "': part " + std::to_string(p.number) +
            " where part " + std::to_string(etags.size() + 1) + " was due");
      }
      etags.push_back(p.tag);
      crc32cs.push_back(p.checksum);
    }
    return CompleteParts(*client_, url, write.id, etags, crc32cs, write.marker,
                         !write.replace);
  }

  Result<bool> SharedWriteCommitted(const std::string& path, const SharedWrite& write) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    if (write.marker.empty()) return false;
    return HasMarker(*client_, url, write.marker);
  }

  Status AbortSharedWrite(const std::string& path,
                          const SharedWrite& write) override {
    RCKPT_ASSIGN_OR_RETURN(S3Url url, ParseS3Url(path));
    return AbortUpload(*client_, url, write.id);
  }

 private:
  // ListObjectsV2 page by page.
  template <typename Fn>
  Status ForEachPage(const std::string& bucket, const std::string& prefix,
                     const std::string& delimiter, Fn&& fn) {
    std::string token;
    for (;;) {
      S3Call c;
      c.op = "ListObjectsV2";
      c.bucket = bucket;
      c.query = {{"list-type", "2"}, {"prefix", prefix}};
      if (!delimiter.empty()) c.query.emplace_back("delimiter", delimiter);
      if (!token.empty()) c.query.emplace_back("continuation-token", token);
      RCKPT_ASSIGN_OR_RETURN(HttpResponse r, client_->Execute(c));
      Result<ObjectPage> page = ParseObjectPage(r.body);
      if (!page.ok()) {
        return page.status().WithContext("ListObjectsV2 's3://" + bucket + "/" + prefix + "'");
      }
      fn(*page);
      if (!page->truncated || page->next_token.empty() || page->next_token == token) break;
      token = page->next_token;
    }
    return Status::Ok();
  }

  const std::shared_ptr<S3Client> client_;
};

// The environment for S3Options::read_environment = false: nothing set.
const Environment& EmptyEnvironment() {
  static const MapEnvironment env;
  return env;
}

Result<std::unique_ptr<FileSystem>> MakeS3Only(const S3Options& options) {
  const Environment& env = options.read_environment ? ProcessEnvironment() : EmptyEnvironment();
  if (!options.read_environment && !options.credentials && !options.credentials_source) {
    return Status::InvalidArgument(
        "S3Options::read_environment is false, so S3Options::credentials (or "
        "credentials_source) must be given");
  }
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> client, S3Client::Create(options, env));
  return NewS3OnlyFileSystem(std::shared_ptr<S3Client>(std::move(client)));
}

}  // namespace

std::unique_ptr<FileSystem> NewS3OnlyFileSystem(std::shared_ptr<S3Client> client) {
  return std::make_unique<S3FileSystem>(std::move(client));
}

}  // namespace rckpt::s3

namespace rckpt {

Result<std::unique_ptr<FileSystem>> NewEnvironmentS3FileSystem() {
  return s3::MakeS3Only(S3Options{});
}

Result<std::unique_ptr<FileSystem>> NewS3FileSystem(const S3Options& options) {
  // Checked now, so a bad option or endpoint fails here, not at first use.
  RCKPT_ASSIGN_OR_RETURN(std::unique_ptr<FileSystem> s3, s3::MakeS3Only(options));
  return std::unique_ptr<FileSystem>(
      std::make_unique<UrlFileSystem>(PosixFileSystem(), std::move(s3)));
}

Result<std::string> S3CredentialSource(const S3Options& options) {
  const s3::Environment& env =
      options.read_environment ? s3::ProcessEnvironment() : s3::EmptyEnvironment();
  RCKPT_ASSIGN_OR_RETURN(s3::Profile profile, s3::LoadProfile(options, env));
  return s3::MakeCredentialsProvider(options, env, profile, nullptr)->Source();
}

bool S3Supported() { return true; }

}  // namespace rckpt
