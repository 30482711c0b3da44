#include "rckpt/human_bytes.h"

#include <cmath>
#include <cstdio>

namespace rckpt {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kGiB = kKiB * 1024 * 1024;

}  // namespace

std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= kKiB && u < 6) {
    v /= kKiB;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B",
                  static_cast<unsigned long long>(n));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string RenderRate(uint64_t bytes, double seconds) {
  char buf[32];
  const double per_s = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
  if (per_s < kGiB) return HumanBytes(std::llround(per_s)) + "/s";
  // Throughputs are compared: one more digit where they usually fall.
  std::snprintf(buf, sizeof buf, "%.2f GiB/s", per_s / kGiB);
  return buf;
}

}  // namespace rckpt
