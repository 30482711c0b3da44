// rckpt: inspect, verify, plan, load, diff and convert checkpoints; doctor;
// incomplete saves.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"

namespace {

using rckpt::cli::CommandInfo;

const CommandInfo* const kCommands[] = {
    &rckpt::cli::kInspect,
    &rckpt::cli::kVerify,
    &rckpt::cli::kPlan,
    &rckpt::cli::kLoad,
    &rckpt::cli::kDiff,
    &rckpt::cli::kConvert,
    &rckpt::cli::kDoctor,
    &rckpt::cli::kIncomplete,
};

void PrintHelp(std::FILE* to) {
  std::fprintf(to,
      "rckpt - relocatable checkpoints for ML training runs\n\n"
      "usage: rckpt COMMAND [options]   (rckpt COMMAND --help for details)\n\ncommands:\n");
  for (const CommandInfo* c : kCommands) std::fprintf(to, "  %-10s %s\n", c->name, c->summary);
  std::fprintf(to,
      "\nexit codes: 0 ok, 1 differences found (diff), 2 usage or invalid options,\n"
      "            3 not found, 4 corrupt file, 5 unsupported, 6 device unavailable or\n"
      "            device error, 7 I/O error, 8 out of memory\n"
      "docs: docs/CLI.md\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    if (argc >= 3 && !std::strcmp(argv[1], "help")) {
      for (const CommandInfo* c : kCommands) {
        if (c->name == std::string(argv[2])) {
          std::fputs(c->help.c_str(), stdout);
          return 0;
        }
      }
    }
    // Without a command it is a usage error: the help goes to stderr.
    PrintHelp(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("rckpt %s\n", RCKPT_VERSION_STRING);
    return 0;
  }
  for (const CommandInfo* c : kCommands) {
    if (c->name != std::string(argv[1])) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const auto& a : args) {
      if (a == "--help" || a == "-h") {
        std::fputs(c->help.c_str(), stdout);
        return 0;
      }
    }
    return c->run(std::move(args));
  }
  std::fprintf(stderr, "rckpt: unknown command '%s' (see 'rckpt --help')\n", argv[1]);
  return 2;
}
