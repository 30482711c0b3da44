#include "convert/zip.h"

#include <algorithm>
#include <array>
#include <set>

#include "convert/bytes.h"

namespace rckpt::convert {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEocdSize = 22;
constexpr uint64_t kLocatorSize = 20;
constexpr uint64_t kZip64EocdSize = 56;
constexpr uint64_t kCentralSize = 46;
constexpr uint64_t kLocalSize = 30;
constexpr uint64_t kMaxComment = 0xffff;
constexpr uint32_t k32Max = 0xffffffffu;

std::string At(uint64_t offset) { return " at offset " + std::to_string(offset); }

Status ReadExact(const RandomAccessFile& f, uint64_t offset, uint64_t n,
                 std::string* out, const char* what) {
  uint64_t end;
  if (!AddOk(offset, n, &end) || end > f.Size()) {
    return Status::Corruption(std::string("zip: ") + what + " [" +
                              std::to_string(offset) + ", " + std::to_string(offset + n) +
                              ") passes the end of the file (" +
                              std::to_string(f.Size()) + " bytes)");
  }
  out->resize(n);
  return f.ReadAt(offset, {reinterpret_cast<std::byte*>(out->data()), out->size()});
}

const std::byte* B(const std::string& s, size_t at = 0) {
  return reinterpret_cast<const std::byte*>(s.data()) + at;
}

// Values a zip64 extra field may override, in the order the spec lists them.
struct Zip64Fields {
  uint64_t uncompressed, compressed, header_offset;
  uint32_t disk;
};

Status ApplyZip64Extra(std::string_view extra, Zip64Fields* f, bool want_uncomp,
                       bool want_comp, bool want_offset, bool want_disk,
                       const std::string& where) {
  size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const std::byte* p = reinterpret_cast<const std::byte*>(extra.data()) + pos;
    uint16_t id = Load16(p);
    uint16_t len = Load16(p + 2);
    if (pos + 4 + len > extra.size()) {
      return Status::Corruption("zip: extra field of " + where + " has length " +
                                std::to_string(len) + " past the end of the extra data");
    }
    if (id == 0x0001) {
      size_t q = 0;
      auto take = [&](uint64_t* v, int n) -> bool {
        if (q + n > len) return false;
        *v = LoadLE(p + 4 + q, n);
        q += n;
        return true;
      };
      uint64_t disk = f->disk;
      if ((want_uncomp && !take(&f->uncompressed, 8)) ||
          (want_comp && !take(&f->compressed, 8)) ||
          (want_offset && !take(&f->header_offset, 8)) || (want_disk && !take(&disk, 4))) {
        return Status::Corruption("zip: zip64 extra field of " + where + " is too short (" +
                                  std::to_string(len) + " bytes)");
      }
      f->disk = static_cast<uint32_t>(disk);
      return Status::Ok();
    }
    pos += 4 + len;
  }
  if (want_uncomp || want_comp || want_offset || want_disk) {
    return Status::Corruption("zip: " + where +
                              " has 32-bit fields set to 0xffffffff but no zip64 extra field");
  }
  return Status::Ok();
}

struct EndRecord {
  uint64_t entries = 0;
  uint64_t cd_size = 0;
  uint64_t cd_offset = 0;
  uint64_t eocd_offset = 0;  // where the central directory must end
};

Result<EndRecord> ReadEnd(const RandomAccessFile& f) {
  uint64_t size = f.Size();
  if (size < kEocdSize) {
    return Status::Corruption("zip: file of " + std::to_string(size) +
                              " bytes is too small for an end-of-central-directory record");
  }
  uint64_t tail_len = std::min<uint64_t>(size, kEocdSize + kMaxComment);
  std::string tail;
  RCKPT_RETURN_IF_ERROR(ReadExact(f, size - tail_len, tail_len, &tail, "end records"));
  int64_t found = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEocdSize); i >= 0; --i) {
    if (Load32(B(tail, i)) == kEocdSig &&
        i + kEocdSize + Load16(B(tail, i + 20)) <= tail_len) {
      found = i;
      break;
    }
  }
  if (found < 0) {
    return Status::Corruption(
        "zip: no end-of-central-directory record in the last " + std::to_string(tail_len) +
        " bytes");
  }
  const std::byte* e = B(tail, found);
  EndRecord r;
  r.eocd_offset = size - tail_len + found;
  uint16_t disk = Load16(e + 4), cd_disk = Load16(e + 6);
  r.entries = Load16(e + 10);
  r.cd_size = Load32(e + 12);
  r.cd_offset = Load32(e + 16);
  if (Load16(e + 8) != Load16(e + 10)) {
    return Status::Unsupported("zip: multi-disk archives are not supported");
  }
  bool zip64 = false;
  if (r.eocd_offset >= kLocatorSize) {
    std::string loc;
    RCKPT_RETURN_IF_ERROR(
        ReadExact(f, r.eocd_offset - kLocatorSize, kLocatorSize, &loc, "zip64 locator"));
    if (Load32(B(loc)) == kZip64LocatorSig) {
      zip64 = true;
      uint64_t z_off = Load64(B(loc, 8));
      std::string z;
      RCKPT_RETURN_IF_ERROR(ReadExact(f, z_off, kZip64EocdSize, &z, "zip64 end record"));
      if (Load32(B(z)) != kZip64EocdSig) {
        return Status::Corruption("zip: zip64 end record signature missing" + At(z_off));
      }
      if (Load32(B(z, 16)) != 0 || Load32(B(z, 20)) != 0 ||
          Load64(B(z, 24)) != Load64(B(z, 32))) {
        return Status::Unsupported("zip: multi-disk archives are not supported");
      }
      r.entries = Load64(B(z, 32));
      r.cd_size = Load64(B(z, 40));
      r.cd_offset = Load64(B(z, 48));
      if (z_off >= r.eocd_offset) {
        return Status::Corruption("zip: zip64 end record" + At(z_off) +
                                  " lies after the end record");
      }
      r.eocd_offset = z_off;
    }
  }
  if (!zip64 && (disk != 0 || cd_disk != 0)) {
    return Status::Unsupported("zip: multi-disk archives are not supported");
  }
  uint64_t cd_end;
  if (!AddOk(r.cd_offset, r.cd_size, &cd_end) || cd_end > r.eocd_offset) {
    return Status::Corruption("zip: central directory [" + std::to_string(r.cd_offset) +
                              ", +" + std::to_string(r.cd_size) +
                              ") passes the end records at " + std::to_string(r.eocd_offset));
  }
  return r;
}

}  // namespace

const ZipEntry* ZipDirectory::Find(std::string_view name) const {
  for (const ZipEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Status SpanFile::ReadAt(uint64_t offset, std::span<std::byte> dst) const {
  uint64_t end;
  if (!AddOk(offset, dst.size(), &end) || end > bytes_.size()) {
    return Status::Corruption("truncated: read [" + std::to_string(offset) + ", +" +
                              std::to_string(dst.size()) + ") passes the end (" +
                              std::to_string(bytes_.size()) + " bytes)");
  }
  if (!dst.empty()) std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
  return Status::Ok();
}

Result<ZipDirectory> ReadZipDirectory(const RandomAccessFile& f, const ZipLimits& limits) {
  RCKPT_ASSIGN_OR_RETURN(EndRecord end, ReadEnd(f));
  if (end.entries > limits.max_entries) {
    return Status::Corruption("zip: " + std::to_string(end.entries) +
                              " entries exceed the limit of " +
                              std::to_string(limits.max_entries));
  }
  if (end.entries * kCentralSize > end.cd_size) {
    return Status::Corruption("zip: central directory of " + std::to_string(end.cd_size) +
                              " bytes cannot hold " + std::to_string(end.entries) +
                              " entries");
  }
  std::string cd;
  RCKPT_RETURN_IF_ERROR(ReadExact(f, end.cd_offset, end.cd_size, &cd, "central directory"));
  ZipDirectory dir;
  dir.entries.reserve(end.entries);
  std::set<std::string, std::less<>> names;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < end.entries; ++i) {
    uint64_t here = end.cd_offset + pos;
    if (pos + kCentralSize > cd.size() || Load32(B(cd, pos)) != kCentralSig) {
      return Status::Corruption("zip: central directory entry " + std::to_string(i) +
                                " has no valid header" + At(here));
    }
    const std::byte* c = B(cd, pos);
    uint16_t flags = Load16(c + 8), method = Load16(c + 10);
    uint64_t name_len = Load16(c + 28), extra_len = Load16(c + 30),
             comment_len = Load16(c + 32);
    uint64_t var_end = pos + kCentralSize + name_len + extra_len + comment_len;
    if (var_end > cd.size()) {
      return Status::Corruption("zip: central directory entry " + std::to_string(i) + At(here) +
                                " passes the end of the directory");
    }
    ZipEntry e;
    e.name = cd.substr(pos + kCentralSize, name_len);
    std::string where = "entry '" + Printable(e.name) + "'";
    if (flags & 1) return Status::Unsupported("zip: " + where + " is encrypted");
    Zip64Fields z{Load32(c + 24), Load32(c + 20), Load32(c + 42), Load16(c + 34)};
    RCKPT_RETURN_IF_ERROR(ApplyZip64Extra(
        std::string_view(cd).substr(pos + kCentralSize + name_len, extra_len), &z,
        z.uncompressed == k32Max, z.compressed == k32Max, z.header_offset == k32Max,
        z.disk == 0xffff, where));
    if (z.disk != 0) return Status::Unsupported("zip: multi-disk archives are not supported");
    if (method == 0 && z.compressed != z.uncompressed) {
      return Status::Corruption("zip: stored " + where + " has compressed size " +
                                std::to_string(z.compressed) + " != uncompressed size " +
                                std::to_string(z.uncompressed));
    }
    if (!names.insert(e.name).second) {
      return Status::Corruption("zip: duplicate " + where);
    }
    e.size = method == 0 ? z.uncompressed : z.compressed;
    e.method = method;
    e.crc32 = Load32(c + 16);
    e.header_offset = z.header_offset;
    // The local header: only its own name and extra lengths are trusted, to
    // find where the data starts (sizes come from the central directory).
    std::string local;
    RCKPT_RETURN_IF_ERROR(
        ReadExact(f, e.header_offset, kLocalSize, &local, ("local header of " + where).c_str()));
    if (Load32(B(local)) != kLocalSig) {
      return Status::Corruption("zip: local header of " + where + " has no signature" +
                                At(e.header_offset));
    }
    uint64_t lname = Load16(B(local, 26)), lextra = Load16(B(local, 28));
    std::string local_name;
    RCKPT_RETURN_IF_ERROR(ReadExact(f, e.header_offset + kLocalSize, lname, &local_name,
                                    ("local name of " + where).c_str()));
    if (local_name != e.name) {
      return Status::Corruption("zip: local header" + At(e.header_offset) + " names '" +
                                Printable(local_name) + "', central directory names '" +
                                Printable(e.name) + "'");
    }
    uint64_t data_end;
    e.data_offset = e.header_offset + kLocalSize + lname + lextra;
    if (!AddOk(e.data_offset, e.size, &data_end) || data_end > end.cd_offset) {
      return Status::Corruption("zip: data of " + where + " [" +
                                std::to_string(e.data_offset) + ", +" +
                                std::to_string(e.size) +
                                ") passes the start of the central directory (" +
                                std::to_string(end.cd_offset) + ")");
    }
    dir.entries.push_back(std::move(e));
    pos = var_end;
  }
  return dir;
}

Result<ZipDirectory> ReadZipDirectoryFromBytes(std::span<const std::byte> bytes,
                                               const ZipLimits& limits) {
  SpanFile f(bytes);
  return ReadZipDirectory(f, limits);
}

ZipWriter::ZipWriter(WritableFile* out, uint32_t alignment)
    : out_(out), alignment_(alignment == 0 ? 1 : alignment) {}

Status ZipWriter::Write(std::span<const std::byte> bytes) {
  RCKPT_RETURN_IF_ERROR(out_->Append(bytes));
  offset_ += bytes.size();
  return Status::Ok();
}

Status ZipWriter::Add(std::string_view name, std::span<const std::byte> data) {
  if (name.empty() || name.size() > 0xffff) {
    return Status::InvalidArgument("zip: entry name length " + std::to_string(name.size()) +
                                   " outside [1, 65535]");
  }
  uint32_t crc = Crc32(data);
  bool zip64 = data.size() >= k32Max;
  bool utf8 = std::any_of(name.begin(), name.end(), [](char c) { return c & 0x80; });
  uint64_t z64_len = zip64 ? 20 : 0;
  uint64_t start = offset_ + kLocalSize + name.size() + z64_len + 4;
  uint64_t pad = (alignment_ - start % alignment_) % alignment_;
  if (pad > 0xffff) return Status::InvalidArgument("zip: alignment padding over 65535 bytes");
  std::string h;
  AppendLE(&h, kLocalSig, 4);
  AppendLE(&h, zip64 ? 45 : 20, 2);
  AppendLE(&h, utf8 ? 0x0800 : 0, 2);
  AppendLE(&h, 0, 2);       // stored
  AppendLE(&h, 0, 2);       // time
  AppendLE(&h, 0x21, 2);    // date: 1980-01-01
  AppendLE(&h, crc, 4);
  AppendLE(&h, zip64 ? k32Max : data.size(), 4);
  AppendLE(&h, zip64 ? k32Max : data.size(), 4);
  AppendLE(&h, name.size(), 2);
  AppendLE(&h, z64_len + 4 + pad, 2);
  h.append(name);
  if (zip64) {
    AppendLE(&h, 0x0001, 2);
    AppendLE(&h, 16, 2);
    AppendLE(&h, data.size(), 8);
    AppendLE(&h, data.size(), 8);
  }
  h += "FB";
  AppendLE(&h, pad, 2);
  h.append(pad, 'Z');
  uint64_t header_offset = offset_;
  RCKPT_RETURN_IF_ERROR(Write(AsBytes(h)));
  RCKPT_RETURN_IF_ERROR(Write(data));
  written_.push_back({std::string(name), header_offset, data.size(), crc});
  return Status::Ok();
}

Status ZipWriter::Finish() {
  uint64_t cd_offset = offset_;
  std::string cd;
  for (const Written& w : written_) {
    bool big_size = w.size >= k32Max, big_off = w.header_offset >= k32Max;
    std::string extra;
    if (big_size || big_off) {
      std::string f;
      if (big_size) {
        AppendLE(&f, w.size, 8);
        AppendLE(&f, w.size, 8);
      }
      if (big_off) AppendLE(&f, w.header_offset, 8);
      AppendLE(&extra, 0x0001, 2);
      AppendLE(&extra, f.size(), 2);
      extra += f;
    }
    bool utf8 = std::any_of(w.name.begin(), w.name.end(), [](char c) { return c & 0x80; });
    AppendLE(&cd, kCentralSig, 4);
    AppendLE(&cd, extra.empty() ? 20 : 45, 2);  // made by
    AppendLE(&cd, extra.empty() ? 20 : 45, 2);  // needed
    AppendLE(&cd, utf8 ? 0x0800 : 0, 2);
    AppendLE(&cd, 0, 2);
    AppendLE(&cd, 0, 2);
    AppendLE(&cd, 0x21, 2);
    AppendLE(&cd, w.crc, 4);
    AppendLE(&cd, big_size ? k32Max : w.size, 4);
    AppendLE(&cd, big_size ? k32Max : w.size, 4);
    AppendLE(&cd, w.name.size(), 2);
    AppendLE(&cd, extra.size(), 2);
    AppendLE(&cd, 0, 2);  // comment
    AppendLE(&cd, 0, 2);  // disk
    AppendLE(&cd, 0, 2);  // internal attributes
    AppendLE(&cd, 0, 4);  // external attributes
    AppendLE(&cd, big_off ? k32Max : w.header_offset, 4);
    cd += w.name;
    cd += extra;
  }
  RCKPT_RETURN_IF_ERROR(Write(AsBytes(cd)));
  uint64_t n = written_.size();
  bool zip64 = n >= 0xffff || cd.size() >= k32Max || cd_offset >= k32Max;
  std::string end;
  if (zip64) {
    uint64_t z_off = offset_;
    AppendLE(&end, kZip64EocdSig, 4);
    AppendLE(&end, kZip64EocdSize - 12, 8);
    AppendLE(&end, 45, 2);
    AppendLE(&end, 45, 2);
    AppendLE(&end, 0, 4);
    AppendLE(&end, 0, 4);
    AppendLE(&end, n, 8);
    AppendLE(&end, n, 8);
    AppendLE(&end, cd.size(), 8);
    AppendLE(&end, cd_offset, 8);
    AppendLE(&end, kZip64LocatorSig, 4);
    AppendLE(&end, 0, 4);
    AppendLE(&end, z_off, 8);
    AppendLE(&end, 1, 4);
  }
  AppendLE(&end, kEocdSig, 4);
  AppendLE(&end, 0, 2);
  AppendLE(&end, 0, 2);
  AppendLE(&end, zip64 ? 0xffff : n, 2);
  AppendLE(&end, zip64 ? 0xffff : n, 2);
  AppendLE(&end, zip64 ? k32Max : cd.size(), 4);
  AppendLE(&end, zip64 ? k32Max : cd_offset, 4);
  AppendLE(&end, 0, 2);
  return Write(AsBytes(end));
}

}  // namespace rckpt::convert
