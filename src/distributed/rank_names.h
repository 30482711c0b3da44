// How a collective save names what belongs to one rank (distributed.h).
#ifndef RCKPT_SRC_DISTRIBUTED_RANK_NAMES_H_
#define RCKPT_SRC_DISTRIBUTED_RANK_NAMES_H_

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "format/collective_layout.h"

namespace rckpt {

// "rank<r>/<name>": rank r's RNG record `name` in the file.
inline std::string RankRngName(int rank, std::string_view name) {
  return "rank" + std::to_string(rank) + "/" + std::string(name);
}

// The rank and the name RankRngName made `file_name` from, or nullopt.
inline std::optional<std::pair<int, std::string>> ParseRankRngName(std::string_view file_name) {
  if (file_name.substr(0, 4) != "rank") return std::nullopt;
  const size_t slash = file_name.find('/');
  if (slash == std::string_view::npos || slash == 4) return std::nullopt;
  int rank = 0;
  auto [end, ec] = std::from_chars(file_name.data() + 4, file_name.data() + slash, rank);
  if (ec != std::errc() || end != file_name.data() + slash || rank < 0) return std::nullopt;
  return std::make_pair(rank, std::string(file_name.substr(slash + 1)));
}

}  // namespace rckpt

#endif  // RCKPT_SRC_DISTRIBUTED_RANK_NAMES_H_
