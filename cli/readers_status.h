// This header defines how `dlock status` shows a resource's read-write lock
// state beyond the lock key (lock/read_write_scripts.h): the live readers
// (--shared runs, ReadWriteLock readers) and a waiting writer's marker.
#ifndef DLOCK_CLI_READERS_STATUS_H_
#define DLOCK_CLI_READERS_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dlock/cli/session.h"
#include "dlock/lock/keys.h"

namespace dlock {
namespace cli {

struct ReadersSnapshot {
  int64_t readers = 0;            // live readers (expiry after the server's now)
  int64_t last_expiry_ms = 0;     // ms until the last of them expires
  int64_t writer_waiting_ms = -2;  // PTTL of the writer-intent marker (-2: none)
};

// One atomic snapshot (script) from server `i`.
absl::StatusOr<ReadersSnapshot> ReadReaders(Session& session, size_t i,
                                            const KeyScheme& keys,
                                            const std::string& resource);

// "" when there is nothing to say (no reader, no waiting writer), else e.g.
// "2 readers (shared), the last expires in 29.9s; a writer is waiting
// (marker expires in 2.5s)".
std::string DescribeReaders(const ReadersSnapshot& r);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_READERS_STATUS_H_
