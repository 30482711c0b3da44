#include "bench_report.h"

#include <cstdio>

#include "util/json_writer.h"

namespace rckpt::bench {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void OptionalDouble(JsonWriter& w, const std::optional<double>& v) {
  if (v) {
    w.Double(*v);
  } else {
    w.Null();
  }
}

}  // namespace

std::optional<bool> CaseResult::met() const {
  if (seconds <= 0) return false;
  std::optional<bool> ok;
  if (target_ratio) ok = ratio() >= *target_ratio;
  if (target_speedup && peer_gbps > 0) ok = ok.value_or(true) && speedup() >= *target_speedup;
  return ok;
}

std::string RenderTable(const Report& r) {
  std::string out;
  for (const auto& [k, v] : r.info) out += k + ": " + v + "\n";
  out += "\nlimits (GB/s = 1e9 bytes/s):\n";
  for (const auto& [k, v] : r.limits) out.append("  ").append(Pad(k, 44) + Fmt("%8.3f", v) + "\n");
  out += '\n';
  out += Pad("case", 40) + Pad("MiB", 9) + Pad("s", 9) + Pad("GB/s", 8) +
         Pad("limit", 30) + Pad("lim GB/s", 9) + Pad("ratio", 7) + Pad("target", 8) +
         Pad("peer", 34) + Pad("peer GB/s", 10) + Pad("x peer", 8) + Pad("target", 7) + "ok\n";
  for (const CaseResult& c : r.results) {
    out += Pad(c.name, 40) + Pad(Fmt("%.1f", c.bytes / 1048576.0), 9) +
           Pad(Fmt("%.4f", c.seconds), 9) + Pad(Fmt("%.3f", c.gbps()), 8) + Pad(c.limit, 30) +
           Pad(c.limit_gbps > 0 ? Fmt("%.3f", c.limit_gbps) : "-", 9) +
           Pad(c.limit_gbps > 0 ? Fmt("%.2f", c.ratio()) : "-", 7) +
           Pad(c.target_ratio ? Fmt(">=%.2f", *c.target_ratio) : "-", 8);
    if (!c.peer.empty()) {
      out += Pad(c.peer, 34);
      if (c.peer_gbps > 0) {
        out += Pad(Fmt("%.3f", c.peer_gbps), 10) + Pad(Fmt("%.2f", c.speedup()), 8) +
               Pad(c.target_speedup ? Fmt(">=%.1f", *c.target_speedup) : "-", 7);
      } else {
        out += Pad("skipped", 25);
      }
    } else {
      out += Pad("", 59);
    }
    const auto met = c.met();
    out += met ? (*met ? "yes" : "NO") : "-";
    if (!c.note.empty()) out += "  (" + c.note + ")";
    out += "\n";
  }
  if (!r.ratios.empty()) {
    out += "\ncompression ratio (raw/stored) per content and filter, single-thread MB/s:\n";
    for (const RatioRow& x : r.ratios) {
      out += "  " + Pad(x.kind, 22) + Pad("zstd " + std::to_string(x.level), 8) +
             Pad(x.filter, 9) + Fmt("%6.3f", x.stored ? double(x.raw) / x.stored : 0) +
             Fmt("   comp %7.1f", x.compress_mbps) + Fmt("   decomp %7.1f", x.decompress_mbps) +
             "\n";
    }
  }
  for (const auto& [what, why] : r.skipped) out += "skipped: " + what + ": " + why + "\n";
  return out;
}

std::string RenderJson(const Report& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("info").BeginObject();
  for (const auto& [k, v] : r.info) w.Key(k).String(v);
  w.EndObject();
  w.Key("limits_gbps").BeginObject();
  for (const auto& [k, v] : r.limits) w.Key(k).Double(v);
  w.EndObject();
  w.Key("results").BeginArray();
  for (const CaseResult& c : r.results) {
    w.BeginObject();
    w.Key("case").String(c.name);
    w.Key("bytes").Uint(c.bytes);
    w.Key("seconds").Double(c.seconds);
    w.Key("gbps").Double(c.gbps());
    w.Key("limit").String(c.limit);
    w.Key("limit_gbps").Double(c.limit_gbps);
    w.Key("ratio_to_limit").Double(c.ratio());
    w.Key("target_ratio");
    OptionalDouble(w, c.target_ratio);
    if (!c.peer.empty()) {
      w.Key("peer").String(c.peer);
      if (c.peer_gbps > 0) {
        w.Key("peer_gbps").Double(c.peer_gbps);
        w.Key("speedup_vs_peer").Double(c.speedup());
      } else {
        w.Key("peer_gbps").Null();
        w.Key("speedup_vs_peer").Null();
        w.Key("peer_skipped").String(c.peer_skipped);
      }
      w.Key("target_speedup");
      OptionalDouble(w, c.target_speedup);
    }
    const auto met = c.met();
    w.Key("target_met");
    if (met) {
      w.Bool(*met);
    } else {
      w.Null();
    }
    if (!c.note.empty()) w.Key("note").String(c.note);
    for (const auto& [k, v] : c.extra) w.Key(k).Double(v);
    w.EndObject();
  }
  w.EndArray();
  w.Key("compression").BeginArray();
  for (const RatioRow& x : r.ratios) {
    w.BeginObject();
    w.Key("content").String(x.kind);
    w.Key("level").Int(x.level);
    w.Key("filter").String(x.filter);
    w.Key("raw_bytes").Uint(x.raw);
    w.Key("stored_bytes").Uint(x.stored);
    w.Key("ratio").Double(x.stored ? double(x.raw) / x.stored : 0);
    w.Key("compress_mbps_1t").Double(x.compress_mbps);
    w.Key("decompress_mbps_1t").Double(x.decompress_mbps);
    w.EndObject();
  }
  w.EndArray();
  w.Key("sweep").BeginArray();
  for (const SweepRow& s : r.sweep) {
    w.BeginObject();
    w.Key("series").String(s.series);
    w.Key("case").String(s.name);
    w.Key("bytes").Uint(s.bytes);
    w.Key("tensors").Uint(s.tensors);
    w.Key("seconds").Double(s.seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("skipped").BeginArray();
  for (const auto& [what, why] : r.skipped) {
    w.BeginObject().Key("what").String(what).Key("reason").String(why).EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

std::string RenderCsv(const Report& r) {
  std::string out = "kind,case,bytes,tensors,seconds,gbps,limit_gbps,peer_gbps\n";
  for (const CaseResult& c : r.results) {
    out += "result," + c.name + "," + std::to_string(c.bytes) + ",," + Fmt("%.6f", c.seconds) +
           "," + Fmt("%.4f", c.gbps()) + "," + Fmt("%.4f", c.limit_gbps) + "," +
           Fmt("%.4f", c.peer_gbps) + "\n";
  }
  for (const SweepRow& s : r.sweep) {
    out += "sweep-" + s.series + "," + s.name + "," + std::to_string(s.bytes) + "," + std::to_string(s.tensors) +
           "," + Fmt("%.6f", s.seconds) + "," +
           Fmt("%.4f", s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0) + ",,\n";
  }
  return out;
}

}  // namespace rckpt::bench
