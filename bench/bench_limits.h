// The hardware ceilings each case is compared with, measured in the same
// run on the same data. Every function returns the seconds of one timed
// run; setup (allocation, opening) happens outside the timed region.
#ifndef RCKPT_BENCH_BENCH_LIMITS_H_
#define RCKPT_BENCH_BENCH_LIMITS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rckpt/runtime.h"
#include "rckpt/status.h"

namespace rckpt::bench {

// Median of `reps` calls of `run` (each returning its own seconds) after
// `warmup` untimed calls.
double Median(int warmup, int reps, const std::function<double()>& run);

// Interleaved medians: each rep runs every function once, in turn, so a
// case and its limit see the same machine (on a shared machine the load
// changes within seconds). Returns the median seconds of each function.
std::vector<double> Interleaved(int warmup, int reps,
                                const std::vector<std::function<double()>>& runs);

// Monotonic wall clock in seconds.
double Now();

// Writing `bytes` of freshly mapped anonymous memory with `threads`
// threads (one page fault per 4 KiB page, or per 2 MiB with `huge`).
double FirstTouchSeconds(uint64_t bytes, int threads, bool huge);

// Copying `bytes` between two already-touched buffers with `threads` threads.
double MemcpySeconds(uint64_t bytes, int threads);

// Reading [begin, end) of `path` with `piece`-sized preads on `threads`
// threads into one pre-faulted buffer.
double PreadSeconds(const std::string& path, uint64_t begin, uint64_t end, int threads,
                    uint64_t piece);

// Writing `spans` one after another to a new file with large writes, then
// fsync, close and rename over `path` (what a save must at least do).
double WriteFsyncSeconds(const std::string& path, const std::vector<std::span<const std::byte>>& spans);

// Drops `path` from the page cache (posix_fadvise DONTNEED, then checks with
// mincore). Returns the fraction of the file still resident afterwards, or
// a negative value when it cannot be checked.
double DropFromCache(const std::string& path);

// Single-thread codec rates over `chunks` (raw bytes per second).
struct CodecRates {
  double compress_bps = 0;    // shuffle (when elem) + zstd compress
  double decompress_bps = 0;  // zstd decompress (+ unshuffle when elem)
  double xxh3_bps = 0;        // checksum of the raw bytes
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;
  // The same work split over `threads` threads at once (diagnostic: on an
  // idle machine it is threads x the single-thread rate; on a shared one it
  // shows how much of the other cores this run actually got).
  double compress_bps_all = 0;
  double decompress_bps_all = 0;
};
struct CodecChunk {
  std::span<const std::byte> raw;
  uint32_t shuffle_elem = 0;
};
CodecRates MeasureCodec(const std::vector<CodecChunk>& chunks, int level, int reps,
                        int threads = 1);

// Chunks compressed once (untimed), then timed single-thread passes.
class CodecSample {
 public:
  CodecSample(std::vector<CodecChunk> chunks, int level);
  double CompressSeconds();    // shuffle (when elem) + compress, all chunks
  double DecompressSeconds();  // decompress (+ unshuffle), all chunks
  uint64_t raw_bytes() const { return raw_bytes_; }

 private:
  std::vector<CodecChunk> chunks_;
  int level_;
  std::vector<std::vector<std::byte>> stored_;
  std::vector<std::byte> tmp_, out_;
  uint64_t raw_bytes_ = 0;
};

// Pinned host-to-device copy bandwidth of `runtime` on `device` (bytes/s),
// copying `bytes` in 64 MiB pieces; 0 when it cannot be measured.
double HostToDeviceBps(DeviceRuntime& runtime, Device device, uint64_t bytes, int reps);

}  // namespace rckpt::bench

#endif  // RCKPT_BENCH_BENCH_LIMITS_H_
