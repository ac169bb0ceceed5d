#include "dlock/cli/command_env.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dlock {
namespace cli {

std::vector<std::string> CommandEnvironment(char* const* base, const Lease& lease,
                                            const std::optional<std::vector<int64_t>>& fences) {
  std::vector<std::string> env;
  for (char* const* e = base; *e != nullptr; ++e) {
    if (absl::StartsWith(*e, "DLOCK_FENCE=") || absl::StartsWith(*e, "DLOCK_FENCES=") ||
        absl::StartsWith(*e, "DLOCK_RESOURCE=")) {
      continue;
    }
    env.emplace_back(*e);
  }
  env.push_back(absl::StrCat("DLOCK_FENCE=", lease.fence));
  env.push_back(absl::StrCat("DLOCK_RESOURCE=", lease.resource));
  if (fences.has_value()) {
    env.push_back(absl::StrCat("DLOCK_FENCES=", absl::StrJoin(*fences, " ")));
  }
  return env;
}

}  // namespace cli
}  // namespace dlock
