#include <regex>
#include <string>
#include <string_view>
#include <utility>

#include "render.h"

namespace rckpt::cli {
namespace {

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

}  // namespace

std::string InFlagTerms(std::string_view message) {
  std::string text(message);
  ReplaceAll(&text, "model_device=\"auto\"", "--model-device auto");
  ReplaceAll(&text, "or map_location (a device such as \"cpu\", or a tag map such as ",
             "or --map-location (a device such as cpu, or a tag map such as ");
  // {"cuda:1": "cpu"} -> cuda:1=cpu
  static const std::regex kJsonMap(R"re(\{"([^"]+)": "([^"]+)"\})re");
  text = std::regex_replace(text, kJsonMap, "$1=$2");
  ReplaceAll(&text, "map_location and model_device are incompatible",
             "--map-location and --model-device cannot be combined");
  ReplaceAll(&text, "(map_location=", "(--map-location ");
  ReplaceAll(&text, ", model_device=", ", --model-device ");
  for (auto [field, flag] : {std::pair<std::string_view, std::string_view>{"map_location", "--map-location"},
                             {"skip_sections", "--skip-sections"},
                             {"model_device", "--model-device"},
                             {"sections", "--sections"},
                             {"staging_bytes", "--staging-bytes"},
                             {"set_device", "--set-device"},
                             {"codec", "--codec"},
                             {"shuffle", "--shuffle"}}) {
    if (text.compare(0, field.size() + 1, std::string(field) + ":") == 0 ||
        text.compare(0, field.size() + 1, std::string(field) + " ") == 0) {
      text.replace(0, field.size(), flag);
    }
    ReplaceAll(&text, "): " + std::string(field) + " ", "): " + std::string(flag) + " ");
  }
  return text;
}

}  // namespace rckpt::cli
