// Results of the throughput suite and their three renderings: a table for
// people, one JSON object for tools, CSV rows for the plot script.
#ifndef RCKPT_BENCH_BENCH_REPORT_H_
#define RCKPT_BENCH_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rckpt::bench {

struct CaseResult {
  std::string name;
  uint64_t bytes = 0;    // raw tensor bytes moved
  double seconds = 0;    // median
  std::string limit;     // what bounds this case
  double limit_gbps = 0;
  std::optional<double> target_ratio;
  // Peer comparison (empty peer: none).
  std::string peer;
  double peer_gbps = 0;
  std::string peer_skipped;  // reason, when the peer could not run
  std::optional<double> target_speedup;
  std::string note;
  std::map<std::string, double> extra;  // e.g. staging bytes

  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
  double ratio() const { return limit_gbps > 0 ? gbps() / limit_gbps : 0; }
  double speedup() const { return peer_gbps > 0 ? gbps() / peer_gbps : 0; }
  // nullopt when no target applies.
  std::optional<bool> met() const;
};

struct RatioRow {
  std::string kind;    // dtype / content
  std::string filter;  // "none" or "shuffle"
  int level = 0;
  uint64_t raw = 0;
  uint64_t stored = 0;
  double compress_mbps = 0;    // single thread
  double decompress_mbps = 0;  // single thread
};

// Rows of the size / tensor-count sweep, for the plot.
struct SweepRow {
  std::string series;  // "size" or "tensors": what the sweep varies
  std::string name;
  uint64_t bytes = 0;
  size_t tensors = 0;
  double seconds = 0;
};

struct Report {
  std::map<std::string, std::string> info;  // machine, options, notes
  std::map<std::string, double> limits;     // name -> GB/s
  std::vector<CaseResult> results;
  std::vector<RatioRow> ratios;
  std::vector<SweepRow> sweep;
  std::vector<std::pair<std::string, std::string>> skipped;  // what, why
};

std::string RenderTable(const Report& r);
std::string RenderJson(const Report& r);
std::string RenderCsv(const Report& r);

}  // namespace rckpt::bench

#endif  // RCKPT_BENCH_BENCH_REPORT_H_
