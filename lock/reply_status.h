// This header defines how the policies read the server's replies: error
// replies to absl::Status (lock.h's error table), the acquire scripts'
// refusals, the restart rule's refusal, and the warning for a release whose
// notification was refused.
#ifndef DLOCK_LOCK_REPLY_STATUS_H_
#define DLOCK_LOCK_REPLY_STATUS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/transport/reply.h"

namespace dlock {

// The restart rule (RedLock always, SimpleLock/ReentrantLock as an option):
// a server whose data-set marker is younger than the restart window refuses
// every acquire with kUnavailable "data set began N ms ago ...: young, M ms
// left ..." ending with the way out and when it is safe (`dlock trust
// --force`, TrustDataSetCommand: only for a server that never held locks or
// kept its data); this tells that refusal from other failures. The window must be >= the largest TTL
// any client of the deployment uses.
bool IsYoungDataSet(const absl::Status& status);
// For such a refusal: how long until the server's data set is old enough
// (zero for any other status).
absl::Duration YoungDataSetTimeLeft(const absl::Status& status);
// How long is left of the restart window per the last young-data-set refusal
// quoted anywhere in `message` (e.g. inside RedLock's "last error: ..."), or
// nullopt when it quotes none.
std::optional<absl::Duration> YoungTimeLeftQuoted(absl::string_view message);

// Interprets the refusals the acquire scripts return as arrays (young data
// set, foreign data under the lock or marker key, exhausted fence counter).
// nullopt when `reply` is not one of them.
std::optional<absl::Status> AcquireRefusalStatus(const KeyScheme& keys,
                                                 absl::string_view resource,
                                                 const Reply& reply);
// The same, given the keys themselves (an acquire script's KEYS).
std::optional<absl::Status> AcquireRefusalStatus(absl::string_view lock_key,
                                                 absl::string_view fence_key,
                                                 absl::string_view data_set_key,
                                                 const Reply& reply);

// Reply mapping shared by the policies (lock.h's error table), by the
// error's code (its first word; inside a script Redis 7 keeps the failing
// call's code):
//   NOPERM, NOAUTH, WRONGPASS, "ERR The user executing the script can't ..."
//       (an ACL refusal inside a script), "ERR Protocol error:
//       unauthenticated ..." (a command of more than 10 arguments from a
//       client that did not AUTH)                         kPermissionDenied
//   READONLY, OOM, LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
//       NOREPLICAS, MISCONF, "ERR max number of clients"  kUnavailable
//   WRONGTYPE, "value is not an integer" (foreign data under a lock or
//       fence key), "increment or decrement would overflow" (fence counter
//       at int64 max), any other ERR (unknown command, script error) or
//       unknown code                                      kInternal
// kUnavailable is transient (RetryLock retries it); the others are
// permanent and end a wait at once.
absl::Status ErrorReplyStatus(const Reply& reply);
// For a reply of a shape the script never produces: ErrorReplyStatus() for
// an error reply, otherwise kInternal naming `what`.
absl::Status UnexpectedReplyStatus(absl::string_view what, const Reply& reply);

// notification was refused: names `publish_error` and says that waiters
// will not be woken.
std::string UnpublishedReleaseWarning(absl::string_view publish_error);

}  // namespace dlock

#endif  // DLOCK_LOCK_REPLY_STATUS_H_
