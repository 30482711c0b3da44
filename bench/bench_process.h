// Whole-process cases: every repetition is a new process, as a restarting
// training run is. rckpt is timed from spawn to exit of `rckpt load FILE`
// (process start included); each peer loads in a fresh Python interpreter
// (bench/peers/process_peer.py) whose start and imports are timed apart.
// The file is in the page cache (warm) or dropped from it before each run
// (cold).
#ifndef RCKPT_BENCH_BENCH_PROCESS_H_
#define RCKPT_BENCH_BENCH_PROCESS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_report.h"

namespace rckpt::bench {

struct ProcessOptions {
  std::string cli;        // the rckpt executable; empty: cases skipped
  std::string python;     // interpreter for the peers
  std::string peers_dir;  // bench/peers
  std::string dir;        // scratch directory
  std::vector<uint64_t> sizes;
  int reps = 3;
  int warmup = 1;
  int threads = 0;
  bool peers = true;
  std::function<void(const std::string&)> log;
};

// Adds rows "process/load/<codec> <size> <warm|cold>" (and their " vs
// <peer>" rows) and the process start times (report->info) to `report`.
void ProcessCases(const ProcessOptions& o, Report* report);

// Save and load of `count` small tensors in this process: rows
// "small/save ..." and "small/load ...", judged against `us_per_tensor`.
void SmallTensorCases(const std::string& dir, int count, int reps, double us_per_tensor,
                      Report* report);

}  // namespace rckpt::bench

#endif  // RCKPT_BENCH_BENCH_PROCESS_H_
