// This header defines the Lua scripts of `Semaphore` (semaphore.h): N
// permits per resource, each an expiring lease of its own. One script per
// operation, each atomic on the server.
//
// The holders of resource R live in ONE sorted set under the lock key P{R}
// (KeyScheme::LockKey): member = the permit's token, score = its expiry in
// Unix ms of the server's clock (TIME). Every script first trims the
// members whose expiry has come (ZREMRANGEBYSCORE -inf now), so a crashed
// holder's permit comes back once its TTL has passed, without anyone
// releasing it. The key's own TTL is kept at the latest expiry + 1 ms, so
// the set vanishes once every permit has expired.
//
//   script                   | KEYS          | ARGV                  | reply
//   -------------------------+---------------+-----------------------+-------------------------
//   SemaphoreAcquireScript   | set, data-    | token, ttl_ms,        | fence (integer >= 1), nil
//                            | set, mark     | window_ms, permits    | when `permits` are held,
//                            |               |                       |
//                            |               |                       | or a refusal (scripts.h)
//   SemaphoreReleaseScript   | set           | token, channel        | 1 removed (+PUBLISH of the
//                            |               |                       | token), 0 not a holder, or
//                            |               |                       | a string (PUBLISH refused)
//   SemaphoreExtendScript    | set           | token, ttl_ms         | 1 expiry = now + ttl,
//                            |               |                       | 0 not a holder
//
// The acquire follows the rules of the other acquire scripts (scripts.h):
// the data-set marker and restart window first ({'young', ...},
// {'foreign', 'marker', ...}), anything under P{R} but a sorted set is
// foreign data ({'foreign', type, -1|0}: never touched), fences come from
// the server's fence mark (script_prelude.h), an exhausted one refuses.
// Each permit gets its own fence, so fences increase across all permit
// holders of R. A mutex (SimpleLock) and a semaphore on the same resource
// name see each other's key as foreign data.
//
// `permits` comes with every acquire and is stored nowhere: an acquire is
// granted while fewer than ITS `permits` hold (after the trim). Lowering N
// revokes nothing: new holders wait until enough leave; raising it admits
// more at once.
//
// Thread-safe: the Script objects are immutable and live forever.
#ifndef DLOCK_LOCK_SEMAPHORE_SCRIPTS_H_
#define DLOCK_LOCK_SEMAPHORE_SCRIPTS_H_

#include <vector>

#include "dlock/lock/scripts.h"
#include "dlock/transport/script.h"

namespace dlock {

const Script& SemaphoreAcquireScript();
const Script& SemaphoreReleaseScript();
const Script& SemaphoreExtendScript();

// The three scripts above (not in AllScripts(): their sorted-set scores
// are server times, which the random differential test cannot compare
// between two servers; tests/differential has a test of their own).
std::vector<NamedScript> SemaphoreScripts();

}  // namespace dlock

#endif  // DLOCK_LOCK_SEMAPHORE_SCRIPTS_H_
