// This header defines how `dlock` reads its command line:
//
//   dlock [FLAGS] SUBCOMMAND [FLAGS] [ARGS...] [-- CMD [ARGS...]]
//
// Flags are Abseil flags (ABSL_FLAG, defined in flags.cc), so they are typed
// and documented in one place, but dlock parses argv itself because it needs
// what absl::ParseCommandLine does not offer:
//   - `--redis URL` may be repeated (one per RedLock server); Abseil flags
//     keep only the last occurrence.
//   - Everything after the first `--` is the command to run, untouched.
//   - Flag names accept '-' for '_' (`--on-lost` is `--on_lost`).
//   - Errors return a Status (the tool exits with its usage code, 64)
//     instead of exiting with 1.
// Accepted spellings: `--name=value`, `--name value`, `-name=value`, and for
// booleans `--name`, `--noname`, `--name=true|false`.
#ifndef DLOCK_CLI_COMMAND_LINE_H_
#define DLOCK_CLI_COMMAND_LINE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dlock {
namespace cli {

struct CommandLine {
  // argv[0].
  std::string program;
  // Arguments that are not flags, before `--` (the subcommand first).
  std::vector<std::string> positional;
  // Every `--redis` value, in order.
  std::vector<std::string> redis_urls;
  // What follows the first `--` (empty if there was none).
  std::vector<std::string> command;
  bool has_separator = false;
  // `--help` (or `-h`) was given: print usage and exit 0.
  bool help = false;
  // Names (canonical, with '_') of the flags given on the command line.
  std::set<std::string> given;
};

// Parses `args` (args[0] is the program) and sets every Abseil flag given.
// kInvalidArgument with a message fit for the user on an unknown flag, a
// missing value or a value the flag's type rejects.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// The --help text: synopsis, subcommands, exit codes and every flag defined
// under cli/ with its default.
std::string UsageText(const std::string& program);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_COMMAND_LINE_H_
