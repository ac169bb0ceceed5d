// This header defines how `dlock status` shows a resource's fair-lock queue
// (lock/fair_scripts.h: the hash P{R}:queue of waiter -> "ticket:expiry",
// plus its "#next" ticket counter): who waits, in which order, and how long
// each entry lives unless its waiter refreshes it.
#ifndef DLOCK_CLI_FAIR_QUEUE_STATUS_H_
#define DLOCK_CLI_FAIR_QUEUE_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/cli/session.h"
#include "dlock/lock/keys.h"

namespace dlock {
namespace cli {

struct FairWaiter {
  std::string waiter;   // the waiter id (its FairLock's prefix, ':', a number)
  int64_t ticket = 0;   // queue order: lower is served first
  int64_t expires_ms = 0;  // ms until the entry expires (server time)
};

struct FairQueueSnapshot {
  std::vector<FairWaiter> waiters;  // live entries, in queue order (ticket)
  int64_t foreign = 0;              // entries not of the "ticket:expiry" form
};

// One atomic, read-only snapshot (script) from server `i`. A queue key of
// another type reads as an empty queue (status reports, it does not judge).
absl::StatusOr<FairQueueSnapshot> ReadFairQueue(Session& session, size_t i,
                                                const KeyScheme& keys,
                                                const std::string& resource);

// "" when nobody waits, else e.g. "fair queue: 2 waiting: 1. 3f..:4
// (expires in 9.98s), 2. a1..:7 (expires in 10s)".
std::string DescribeFairQueue(const FairQueueSnapshot& q);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_FAIR_QUEUE_STATUS_H_
