// This header defines the environment `dlock run` gives its command: dlock's
// own, with the lease in it -- DLOCK_RESOURCE (the resource, or several
// resources' sorted list joined by ','), DLOCK_FENCE (the lease's fencing
// token, for the resource it protects) and, for several resources,
// DLOCK_FENCES (each one's fence, in DLOCK_RESOURCE's order, joined by ' ').
#ifndef DLOCK_CLI_COMMAND_ENV_H_
#define DLOCK_CLI_COMMAND_ENV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlock/lock/lock.h"

namespace dlock {
namespace cli {

// `base` (NAME=VALUE strings, null-terminated like `environ`) without any
// DLOCK_RESOURCE, DLOCK_FENCE or DLOCK_FENCES it has, then those for
// `lease`; DLOCK_FENCES only when `fences` has a value.
std::vector<std::string> CommandEnvironment(char* const* base, const Lease& lease,
                                            const std::optional<std::vector<int64_t>>& fences);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_COMMAND_ENV_H_
