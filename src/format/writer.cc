#include "format/writer.h"

#include <algorithm>

#include "codec/codec.h"

namespace rckpt {

uint64_t ChunkOffset(uint64_t offset, uint64_t stored_size, uint32_t alignment) {
  return AlignUp(offset, stored_size >= alignment ? alignment : kMinAlignment);
}

ChunkWriter::ChunkWriter(WritableFile& file, uint64_t offset, uint32_t alignment)
    : file_(file), offset_(offset), alignment_(alignment) {
  buf_.reserve(kBufSize);
}

Result<uint64_t> ChunkWriter::Append(std::span<const std::byte> stored) {
  RCKPT_RETURN_IF_ERROR(PadTo(ChunkOffset(offset_, stored.size(), alignment_)));
  const uint64_t at = offset_;
  RCKPT_RETURN_IF_ERROR(Write(stored));
  return at;
}

Status ChunkWriter::Write(std::span<const std::byte> data) {
  offset_ += data.size();
  if (data.size() >= kDirectBytes) {
    RCKPT_RETURN_IF_ERROR(Flush());
    return file_.Append(data);
  }
  if (buf_.size() + data.size() > kBufSize) RCKPT_RETURN_IF_ERROR(Flush());
  buf_.insert(buf_.end(), data.begin(), data.end());
  return Status::Ok();
}

Status ChunkWriter::PadTo(uint64_t offset) {
  static const std::byte kZeros[4096] = {};
  while (offset_ < offset) {
    const uint64_t n = std::min<uint64_t>(sizeof kZeros, offset - offset_);
    RCKPT_RETURN_IF_ERROR(Write(std::span<const std::byte>(kZeros, n)));
  }
  return Status::Ok();
}

Status ChunkWriter::Flush() {
  if (buf_.empty()) return Status::Ok();
  Status s = file_.Append(buf_);
  buf_.clear();
  return s;
}

Status WriteHeader(WritableFile& file, uint32_t alignment, uint16_t version_minor) {
  Header header;
  header.alignment = alignment;
  header.version_minor = version_minor;
  return file.Append(EncodeHeader(header));
}

Status AppendManifestAndFooter(WritableFile& file, uint64_t data_end,
                               const std::vector<uint8_t>& manifest, uint16_t version_minor) {
  const uint64_t manifest_offset = AlignUp(data_end, 8);
  static const std::byte kZeros[8] = {};
  RCKPT_RETURN_IF_ERROR(file.Append({kZeros, manifest_offset - data_end}));
  const auto bytes = std::as_bytes(std::span<const uint8_t>(manifest));
  RCKPT_RETURN_IF_ERROR(file.Append(bytes));
  RCKPT_RETURN_IF_ERROR(file.Append(EncodeFooter(FooterFor(data_end, manifest, version_minor))));
  return Status::Ok();
}

Footer FooterFor(uint64_t data_end, const std::vector<uint8_t>& manifest,
                 uint16_t version_minor) {
  Footer footer;
  footer.manifest_offset = AlignUp(data_end, 8);
  footer.manifest_size = manifest.size();
  footer.manifest_checksum = Checksum(std::as_bytes(std::span<const uint8_t>(manifest)));
  footer.data_end = data_end;
  footer.file_size = footer.manifest_offset + manifest.size() + kFooterSize;
  footer.version_minor = version_minor;
  return footer;
}

}  // namespace rckpt
