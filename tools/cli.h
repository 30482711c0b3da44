// Shared pieces of the rckpt command-line tool: argument scanning, errors,
// progress bars. Each command lives in cmd_<name>.cc.
#ifndef RCKPT_TOOLS_CLI_H_
#define RCKPT_TOOLS_CLI_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rckpt/options.h"
#include "rckpt/status.h"

namespace rckpt::cli {

// Scans argv for flags. Flags are "--name value" or "--name=value"; every
// other word is positional. Unknown flags are a usage error.
class Args {
 public:
  Args(std::vector<std::string> words) : words_(std::move(words)) {}  // NOLINT

  // Declares a boolean flag; true when present.
  bool Flag(std::string_view name);
  // Declares a flag with a value; nullopt when absent.
  std::optional<std::string> Value(std::string_view name);
  // Repeated flag with values, in order.
  std::vector<std::string> Values(std::string_view name);

  // After all declarations: the positional words, or InvalidArgument for an
  // unknown flag or a flag missing its value.
  Result<std::vector<std::string>> Positional();

 private:
  std::vector<std::string> words_;
  std::vector<bool> used_ = std::vector<bool>(words_.size(), false);
  Status error_;
};

// Parses a non-negative decimal no larger than `max` for flag --<flag>.
Result<uint64_t> ParseCount(const std::string& flag, const std::string& text, uint64_t max);

// Parses a decimal integer from `min` to `max` (negative allowed) for flag
// --<flag>; out-of-range values, overflow included, name the flag.
Result<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min,
                         int64_t max);

// The exit code for a status (docs/CLI.md): 0 OK, 2 InvalidArgument,
// 3 NotFound, 4 Corruption, 5 Unsupported, 6 DeviceUnavailable/DeviceError,
// 7 IoError, 8 OutOfMemory, 9 AlreadyExists. (1 is diff's "different".)
int ExitCodeFor(const Status& status);

// Prints "rckpt <cmd>: <status message>" on stderr; returns the exit code.
// Library option names in the message (map_location, model_device, sections,
// ...) are rewritten as the flags a CLI user types.
int Fail(std::string_view cmd, const Status& status);
// Prints a usage error and the command's help hint; returns 2.
int Usage(std::string_view cmd, std::string_view message);

// A progress bar on stderr when it is a terminal (silent otherwise). The
// returned callback never cancels.
ProgressCallback ProgressBar(std::string label);
void EndProgress();

using Command = int (*)(std::vector<std::string> args);
struct CommandInfo {
  const char* name;
  const char* summary;
  std::string help;
  Command run;
};
// Defined by each cmd_*.cc.
extern const CommandInfo kInspect;
extern const CommandInfo kVerify;
extern const CommandInfo kPlan;
extern const CommandInfo kLoad;
extern const CommandInfo kDiff;
extern const CommandInfo kConvert;
extern const CommandInfo kDoctor;
extern const CommandInfo kIncomplete;

}  // namespace rckpt::cli

#endif  // RCKPT_TOOLS_CLI_H_
