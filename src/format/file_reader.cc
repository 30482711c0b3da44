#include "format/file_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include "codec/codec.h"
#include "format/chunk_codec.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "format/padding.h"
#include "util/free_list.h"
#include "util/hex.h"
#include "util/thread_pool.h"

namespace rckpt {
namespace {

// Names what a non-rckpt file most likely is, so the error helps.
std::string Sniff(std::span<const std::byte> head) {
  std::string_view s(reinterpret_cast<const char*>(head.data()), head.size());
  if (s.substr(0, 24) == "version https://git-lfs.") {
    return " (it is a Git LFS pointer file: run 'git lfs pull' to fetch the checkpoint)";
  }
  if (s.substr(0, 4) == std::string_view("PK\x03\x04", 4)) {
    return " (it is a zip archive, perhaps a PyTorch .pt file: use 'rckpt convert')";
  }
  if (head.size() >= 9 && s[8] == '{') {
    return " (it looks like a safetensors file: use 'rckpt convert')";
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<FileReader>> FileReader::Open(FileSystem& fs, const std::string& path) {
  RCKPT_ASSIGN_OR_RETURN(auto file, fs.OpenForRead(path));
  return Open(std::move(file), path);
}

Result<std::unique_ptr<FileReader>> FileReader::Open(std::unique_ptr<RandomAccessFile> file,
                                                     const std::string& path) {
  std::unique_ptr<FileReader> r(new FileReader());
  r->path_ = path;
  const uint64_t size = file->Size();
  auto fail = [&](const Status& s) { return s.WithContext("'" + path + "'"); };
  std::byte head[kHeaderSize] = {};
  const size_t head_n = static_cast<size_t>(std::min<uint64_t>(size, kHeaderSize));
  if (head_n) RCKPT_RETURN_IF_ERROR(fail(file->ReadAt(0, {head, head_n})));
  if (size < kHeaderSize + kFooterSize) {
    return fail(Status::Corruption("file is " + std::to_string(size) +
                                   " bytes, smaller than the smallest rckpt file (" +
                                   std::to_string(kHeaderSize + kFooterSize) + ")" +
                                   Sniff({head, head_n})));
  }
  auto header = DecodeHeader({head, kHeaderSize});
  if (!header.ok()) {
    return fail(Status(header.status().code(), header.status().message() + Sniff({head, head_n})));
  }
  std::byte foot[kFooterSize];
  RCKPT_RETURN_IF_ERROR(fail(file->ReadAt(size - kFooterSize, foot)));
  RCKPT_ASSIGN_OR_RETURN(Footer footer, [&]() -> Result<Footer> {
    auto f = DecodeFooter(foot);
    if (!f.ok()) return fail(f.status());
    return f;
  }());
  if (footer.file_size != size) {
    return fail(Status::Corruption("footer: file_size is " + std::to_string(footer.file_size) +
                                   ", the file has " + std::to_string(size) +
                                   " bytes (truncated or appended to)"));
  }
  if (footer.version_major != header->version_major ||
      footer.version_minor != header->version_minor) {
    return fail(Status::Corruption("footer: version differs from the header's"));
  }
  const uint64_t manifest_limit = size - kFooterSize;
  uint64_t manifest_end = 0;
  if (footer.data_end < kHeaderSize || footer.manifest_offset < footer.data_end ||
      footer.manifest_offset % 8 != 0 ||
      __builtin_add_overflow(footer.manifest_offset, footer.manifest_size, &manifest_end) ||
      manifest_end != manifest_limit || footer.manifest_size < 8 ||
      footer.manifest_size > kMaxManifestBytes) {
    return fail(Status::Corruption(
        "footer: manifest extent [" + std::to_string(footer.manifest_offset) + ", +" +
        std::to_string(footer.manifest_size) + ") with data end " +
        std::to_string(footer.data_end) + " does not fit the file: expected data end >= " +
        std::to_string(kHeaderSize) + ", manifest 8-aligned after the data, ending at " +
        std::to_string(manifest_limit)));
  }
  std::vector<uint8_t> manifest(footer.manifest_size);
  RCKPT_RETURN_IF_ERROR(fail(file->ReadAt(
      footer.manifest_offset, std::as_writable_bytes(std::span<uint8_t>(manifest)))));
  uint64_t sum = Checksum(std::as_bytes(std::span<const uint8_t>(manifest)));
  if (sum != footer.manifest_checksum) {
    return fail(Status::Corruption("manifest: checksum mismatch (stored " +
                                   Hex64(footer.manifest_checksum) + ", computed " + Hex64(sum) + ")"));
  }
  FileBounds bounds{size, kHeaderSize, footer.data_end, header->alignment};
  auto parsed = ParseManifest(manifest, bounds);
  if (!parsed.ok()) return fail(parsed.status());
  r->manifest_ = std::move(parsed).value();
  r->manifest_.manifest_offset = footer.manifest_offset;
  r->manifest_.manifest_size = footer.manifest_size;
  r->manifest_.file_size = size;
  r->file_ = std::move(file);
  return r;
}

Status FileReader::ReadStored(const ChunkMeta& chunk, std::span<std::byte> stored) const {
  return file_->ReadAt(chunk.offset, stored.first(chunk.stored_size));
}

std::string FileReader::ChunkWhere(const TensorMeta& tensor, size_t chunk_index) const {
  return "'" + path_ + "': tensor '" + tensor.name + "': chunk " + std::to_string(chunk_index) +
         " at offset " + std::to_string(tensor.chunks[chunk_index].offset);
}

Status FileReader::CheckChecksum(const TensorMeta& tensor, size_t chunk_index,
                                 uint64_t computed) const {
  const uint64_t stored = tensor.chunks[chunk_index].checksum;
  if (computed == stored) return Status::Ok();
  return Status::Corruption(ChunkWhere(tensor, chunk_index) + ": checksum mismatch (stored " +
                            Hex64(stored) + ", computed " + Hex64(computed) + ")");
}

Status FileReader::ReadVerified(const TensorMeta& tensor, size_t chunk_index,
                                std::span<std::byte> stored, const std::byte* src) const {
  const ChunkMeta& c = tensor.chunks[chunk_index];
  if (src == nullptr && file_->ReadConcurrency() > 0) {
    // Each read of an object store is a request: the chunk comes in one.
    RCKPT_RETURN_IF_ERROR(file_->ReadAt(c.offset, stored));
    return CheckChecksum(tensor, chunk_index, Checksum(stored));
  }
  auto fill = [&](uint64_t off, std::span<std::byte> piece) {
    if (src != nullptr) {
      std::memcpy(piece.data(), src + off, piece.size());
      return Status::Ok();
    }
    return file_->ReadAt(c.offset + off, piece);
  };
  if (stored.size() <= kHashPieceBytes) {
    RCKPT_RETURN_IF_ERROR(fill(0, stored));
    return CheckChecksum(tensor, chunk_index, Checksum(stored));
  }
  ChecksumStream sum;
  for (uint64_t off = 0; off < stored.size(); off += kHashPieceBytes) {
    std::span<std::byte> piece =
        stored.subspan(off, std::min<uint64_t>(kHashPieceBytes, stored.size() - off));
    RCKPT_RETURN_IF_ERROR(fill(off, piece));
    sum.Update(piece);
  }
  return CheckChecksum(tensor, chunk_index, sum.Digest());
}

Status FileReader::DecodeChunk(const TensorMeta& tensor, size_t chunk_index,
                               std::span<const std::byte> stored, std::span<std::byte> dst,
                               ScratchBuffer& scratch, bool verify,
                               bool keep_shuffled) const {
  const ChunkMeta& c = tensor.chunks[chunk_index];
  auto where = [&] { return ChunkWhere(tensor, chunk_index); };
  if (verify) RCKPT_RETURN_IF_ERROR(CheckChecksum(tensor, chunk_index, Checksum(stored)));
  Status s = rckpt::DecodeChunk(c, stored, dst, scratch, keep_shuffled);
  return s.ok() ? s : Status::Corruption(where() + ": " + s.message());
}

Status FileReader::ReadTensorToHost(const TensorMeta& tensor, std::span<std::byte> dst,
                                    bool verify) const {
  std::vector<std::byte> stored;
  ScratchBuffer scratch;
  for (size_t i = 0; i < tensor.chunks.size(); ++i) {
    const ChunkMeta& c = tensor.chunks[i];
    std::span<std::byte> out = dst.subspan(c.tensor_offset, c.raw_size);
    if (StoredRaw(c)) {
      // Raw chunks are read straight into place.
      RCKPT_RETURN_IF_ERROR(ReadStored(c, out));
      RCKPT_RETURN_IF_ERROR(DecodeChunk(tensor, i, out, out, scratch, verify));
      continue;
    }
    stored.resize(c.stored_size);
    RCKPT_RETURN_IF_ERROR(ReadStored(c, stored));
    RCKPT_RETURN_IF_ERROR(DecodeChunk(tensor, i, stored, out, scratch, verify));
  }
  return Status::Ok();
}

Status FileReader::VerifyChunk(const TensorMeta& tensor, size_t chunk_index,
                               ScratchBuffer& stored_buf, ScratchBuffer& raw_buf,
                               ScratchBuffer& scratch) const {
  const ChunkMeta& c = tensor.chunks[chunk_index];
  std::span<std::byte> stored = stored_buf.Get(c.stored_size);
  RCKPT_RETURN_IF_ERROR(ReadVerified(tensor, chunk_index, stored));
  // Raw chunks are their stored bytes: nothing to decode.
  if (c.codec == Codec::kNone) return Status::Ok();
  return DecodeChunk(tensor, chunk_index, stored, raw_buf.Get(c.raw_size), scratch,
                     /*verify=*/false);
}

Status FileReader::VerifyAll(const ProgressCallback& progress) const {
  RCKPT_RETURN_IF_ERROR(VerifyZeroPadding(*file_, manifest_, path_));
  struct Item {
    const TensorMeta* tensor;
    size_t chunk;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  for (const auto& t : manifest_.tensors) {
    for (size_t c = 0; c < t.chunks.size(); ++c) {
      items.push_back({&t, c});
      total += t.chunks[c].stored_size;
    }
  }
  // Buffers are reused across chunks (never zero-filled): fresh memory for
  // every chunk would cost more than reading it.
  struct Buffers {
    ScratchBuffer stored, raw, scratch;
  };
  FreeList<Buffers> buffers;
  // Batches keep memory bounded and let progress be reported from this thread.
  ThreadPool pool(std::max(ResolveThreads(0), file_->ReadConcurrency()));
  const size_t batch = static_cast<size_t>(pool.size()) * 4;
  uint64_t done = 0;
  for (size_t begin = 0; begin < items.size(); begin += batch) {
    size_t end = std::min(items.size(), begin + batch);
    std::vector<Status> results(end - begin);
    pool.ParallelFor(end - begin, [&](size_t k) {
      const Item& it = items[begin + k];
      std::unique_ptr<Buffers> b = buffers.Take();
      try {
        results[k] = VerifyChunk(*it.tensor, it.chunk, b->stored, b->raw, b->scratch);
        // Read once more before refusing, as a load does.
        if (results[k].code() == StatusCode::kCorruption) {
          results[k] = VerifyChunk(*it.tensor, it.chunk, b->stored, b->raw, b->scratch);
        }
      } catch (const std::bad_alloc&) {
        results[k] = Status::OutOfMemory("verify '" + path_ + "': tensor '" + it.tensor->name +
                                         "': chunk " + std::to_string(it.chunk));
      }
      buffers.Give(std::move(b));
    });
    for (size_t k = 0; k < results.size(); ++k) {
      if (!results[k].ok()) return results[k];
      done += items[begin + k].tensor->chunks[items[begin + k].chunk].stored_size;
    }
    if (progress && !progress(done, total)) return Status::IoError("verify cancelled");
  }
  return Status::Ok();
}

}  // namespace rckpt
