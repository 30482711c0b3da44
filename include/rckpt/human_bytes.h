// Byte counts and throughputs for people, in one unit system: binary (IEC)
// units, 1 KiB = 1024 bytes, 1 MiB = 1024 KiB, 1 GiB = 1024 MiB. Every
// human-readable report of rckpt (the rckpt tool's inspect, verify, convert,
// load and progress bar, and the load report) prints through these two
// functions. Machine-readable output (JSON) carries exact byte counts.
//
// Thread-safe: pure functions.
#ifndef RCKPT_HUMAN_BYTES_H_
#define RCKPT_HUMAN_BYTES_H_

#include <cstdint>
#include <string>

namespace rckpt {

// "512 B" (exact below 1 KiB), "1.5 KiB", "8.1 MiB", "3.2 GiB", ... up to EiB,
// one decimal.
std::string HumanBytes(uint64_t n);

// A throughput: "1.15 GiB/s" (two decimals) from 1 GiB/s up; below, the
// rate per second as HumanBytes writes it: "43.5 MiB/s", "40.2 KiB/s",
// "512 B/s" (a small transfer's "0.00 GiB/s" would say nothing). No time
// measured (seconds <= 0) gives "0 B/s".
std::string RenderRate(uint64_t bytes, double seconds);

}  // namespace rckpt

#endif  // RCKPT_HUMAN_BYTES_H_
