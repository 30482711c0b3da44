#include "bench_limits.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "codec/codec.h"

namespace rckpt::bench {
namespace {

// Runs fn(i) for i in [0, threads) on that many threads, the caller included.
void OnThreads(int threads, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 1; i < threads; ++i) ts.emplace_back(fn, i);
  fn(0);
  for (auto& t : ts) t.join();
}

struct Mapping {
  void* p = MAP_FAILED;
  size_t n = 0;
  explicit Mapping(size_t bytes) : n(std::max<size_t>(bytes, 1)) {
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  ~Mapping() {
    if (p != MAP_FAILED) ::munmap(p, n);
  }
  std::byte* data() const { return static_cast<std::byte*>(p); }
};

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(int warmup, int reps, const std::function<double()>& run) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < std::max(reps, 1); ++i) t.push_back(run());
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
}

std::vector<double> Interleaved(int warmup, int reps,
                                const std::vector<std::function<double()>>& runs) {
  for (int i = 0; i < warmup; ++i) {
    for (const auto& run : runs) run();
  }
  std::vector<std::vector<double>> t(runs.size());
  for (int i = 0; i < std::max(reps, 1); ++i) {
    for (size_t k = 0; k < runs.size(); ++k) t[k].push_back(runs[k]());
  }
  std::vector<double> medians;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    medians.push_back(v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
  }
  return medians;
}

CodecSample::CodecSample(std::vector<CodecChunk> chunks, int level)
    : chunks_(std::move(chunks)), level_(level), stored_(chunks_.size()) {
  size_t max_raw = 0;
  for (const CodecChunk& c : chunks_) {
    raw_bytes_ += c.raw.size();
    max_raw = std::max(max_raw, c.raw.size());
  }
  tmp_.assign(max_raw, std::byte{0});
  out_.assign(max_raw, std::byte{0});
  for (size_t i = 0; i < chunks_.size(); ++i) {
    std::span<const std::byte> in = chunks_[i].raw;
    if (chunks_[i].shuffle_elem) {
      ShuffleBytes(in, std::span(tmp_).first(in.size()), chunks_[i].shuffle_elem);
      in = std::span(tmp_).first(in.size());
    }
    stored_[i].resize(ZstdBound(in.size()));
    auto n = ZstdCompress(in, stored_[i], level_);
    stored_[i].resize(n.ok() ? *n : 0);
  }
}

double CodecSample::CompressSeconds() {
  std::vector<std::byte> dst(ZstdBound(tmp_.size()));
  const double t0 = Now();
  for (const CodecChunk& c : chunks_) {
    std::span<const std::byte> in = c.raw;
    if (c.shuffle_elem) {
      ShuffleBytes(in, std::span(tmp_).first(in.size()), c.shuffle_elem);
      in = std::span(tmp_).first(in.size());
    }
    (void)ZstdCompress(in, dst, level_);
  }
  return Now() - t0;
}

double CodecSample::DecompressSeconds() {
  const double t0 = Now();
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const size_t raw = chunks_[i].raw.size();
    if (chunks_[i].shuffle_elem) {
      (void)ZstdDecompressExact(stored_[i], std::span(tmp_).first(raw));
      UnshuffleBytes(std::span(tmp_).first(raw), std::span(out_).first(raw),
                     chunks_[i].shuffle_elem);
    } else {
      (void)ZstdDecompressExact(stored_[i], std::span(out_).first(raw));
    }
  }
  return Now() - t0;
}

double FirstTouchSeconds(uint64_t bytes, int threads, bool huge) {
  Mapping m(bytes);
  if (m.p == MAP_FAILED) return 0;
  if (huge) ::madvise(m.p, m.n, MADV_HUGEPAGE);
  const uint64_t per = (bytes + threads - 1) / threads;
  const double t0 = Now();
  OnThreads(threads, [&](int i) {
    const uint64_t b = std::min(bytes, per * i), e = std::min(bytes, per * (i + 1));
    std::memset(m.data() + b, 1, e - b);
  });
  return Now() - t0;
}

double MemcpySeconds(uint64_t bytes, int threads) {
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes, std::byte{2});
  const uint64_t per = (bytes + threads - 1) / threads;
  const double t0 = Now();
  OnThreads(threads, [&](int i) {
    const uint64_t s = std::min(bytes, per * i), e = std::min(bytes, per * (i + 1));
    std::memcpy(b.data() + s, a.data() + s, e - s);
  });
  return Now() - t0;
}

double PreadSeconds(const std::string& path, uint64_t begin, uint64_t end, int threads,
                    uint64_t piece) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const uint64_t bytes = end - begin;
  std::vector<std::byte> buf(bytes, std::byte{0});  // pre-faulted
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  const double t0 = Now();
  OnThreads(threads, [&](int) {
    for (uint64_t off; (off = next.fetch_add(piece)) < bytes;) {
      const uint64_t n = std::min(piece, bytes - off);
      if (::pread(fd, buf.data() + off, n, static_cast<off_t>(begin + off)) !=
          static_cast<ssize_t>(n)) {
        failed = true;
      }
    }
  });
  const double t = Now() - t0;
  ::close(fd);
  return failed ? 0 : t;
}

double WriteFsyncSeconds(const std::string& path,
                         const std::vector<std::span<const std::byte>>& spans) {
  const std::string tmp = path + ".tmp";
  const double t0 = Now();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  bool ok = true;
  for (std::span<const std::byte> s : spans) {
    for (size_t done = 0; ok && done < s.size();) {
      const ssize_t n = ::write(fd, s.data() + done, std::min<size_t>(s.size() - done, 64 << 20));
      ok = n > 0;
      done += ok ? static_cast<size_t>(n) : 0;
    }
  }
  ok = ok && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  const double t = Now() - t0;
  return ok ? t : 0;
}

double DropFromCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  double resident = -1;
  void* p = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (p != MAP_FAILED) {
    const long page = ::sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> vec((size + page - 1) / page);
    if (::mincore(p, size, vec.data()) == 0) {
      size_t in = 0;
      for (unsigned char v : vec) in += v & 1;
      resident = static_cast<double>(in) / vec.size();
    }
    ::munmap(p, size);
  }
  ::close(fd);
  return resident;
}

CodecRates MeasureCodec(const std::vector<CodecChunk>& chunks, int level, int reps, int threads) {
  CodecRates r;
  size_t max_raw = 0;
  for (const CodecChunk& c : chunks) {
    r.raw_bytes += c.raw.size();
    max_raw = std::max(max_raw, c.raw.size());
  }
  std::vector<std::vector<std::byte>> stored(chunks.size());
  std::vector<std::byte> shuffled(max_raw, std::byte{0}), out(max_raw, std::byte{0});
  const double tc = Median(0, reps, [&] {
    r.stored_bytes = 0;
    const double t0 = Now();
    for (size_t i = 0; i < chunks.size(); ++i) {
      std::span<const std::byte> in = chunks[i].raw;
      if (chunks[i].shuffle_elem) {
        ShuffleBytes(in, std::span(shuffled).first(in.size()), chunks[i].shuffle_elem);
        in = std::span(shuffled).first(in.size());
      }
      stored[i].resize(ZstdBound(in.size()));
      auto n = ZstdCompress(in, stored[i], level);
      stored[i].resize(n.ok() ? *n : 0);
      r.stored_bytes += stored[i].size();
    }
    return Now() - t0;
  });
  const double td = Median(1, reps, [&] {
    const double t0 = Now();
    for (size_t i = 0; i < chunks.size(); ++i) {
      const size_t raw = chunks[i].raw.size();
      if (chunks[i].shuffle_elem) {
        (void)ZstdDecompressExact(stored[i], std::span(shuffled).first(raw));
        UnshuffleBytes(std::span(shuffled).first(raw), std::span(out).first(raw),
                       chunks[i].shuffle_elem);
      } else {
        (void)ZstdDecompressExact(stored[i], std::span(out).first(raw));
      }
    }
    return Now() - t0;
  });
  uint64_t sink = 0;
  const double tx = Median(1, reps, [&] {
    const double t0 = Now();
    for (const CodecChunk& c : chunks) sink += Checksum(c.raw);
    return Now() - t0;
  });
  if (threads > 1) {
    // Thread i takes chunks i, i + threads, ...; each has its own buffers.
    auto stripe = [&](bool compress) {
      return Median(0, reps, [&] {
        const double t0 = Now();
        OnThreads(threads, [&](int i) {
          std::vector<std::byte> tmp(max_raw), dst(ZstdBound(max_raw));
          for (size_t k = i; k < chunks.size(); k += threads) {
            const CodecChunk& c = chunks[k];
            const auto t = std::span(tmp).first(c.raw.size());
            if (compress) {
              std::span<const std::byte> in = c.raw;
              if (c.shuffle_elem) ShuffleBytes(in, t, c.shuffle_elem), in = t;
              (void)ZstdCompress(in, dst, level);
            } else if (c.shuffle_elem) {
              (void)ZstdDecompressExact(stored[k], t);
              UnshuffleBytes(t, std::span(dst).first(t.size()), c.shuffle_elem);
            } else {
              (void)ZstdDecompressExact(stored[k], t);
            }
          }
        });
        return Now() - t0;
      });
    };
    const double tca = stripe(true), tda = stripe(false);
    r.compress_bps_all = tca > 0 ? r.raw_bytes / tca : 0;
    r.decompress_bps_all = tda > 0 ? r.raw_bytes / tda : 0;
  }
  r.compress_bps = tc > 0 ? r.raw_bytes / tc : 0;
  r.decompress_bps = td > 0 ? r.raw_bytes / td : 0;
  r.xxh3_bps = tx > 0 && sink != 1 ? r.raw_bytes / tx : 0;
  return r;
}

double HostToDeviceBps(DeviceRuntime& rt, Device device, uint64_t bytes, int reps) {
  const uint64_t piece = std::min<uint64_t>(bytes, 64ull << 20);
  auto pinned = rt.AllocatePinned(device, piece);
  if (!pinned.ok()) return 0;
  auto dev = rt.Allocate(device, bytes);
  auto stream = rt.CreateStream(device);
  double bps = 0;
  if (dev.ok() && stream.ok()) {
    std::memset(*pinned, 1, piece);
    bool ok = true;
    const double t = Median(1, reps, [&] {
      const double t0 = Now();
      for (uint64_t off = 0; off < bytes; off += piece) {
        ok = ok && rt.CopyToDeviceAsync(device, *stream, static_cast<std::byte*>(*dev) + off,
                                        *pinned, std::min(piece, bytes - off)).ok();
      }
      ok = ok && rt.Synchronize(device, *stream).ok();
      return Now() - t0;
    });
    bps = ok && t > 0 ? bytes / t : 0;
  }
  if (stream.ok()) rt.DestroyStream(device, *stream);
  if (dev.ok()) rt.Free(device, *dev);
  rt.FreePinned(*pinned);
  return bps;
}

}  // namespace rckpt::bench
