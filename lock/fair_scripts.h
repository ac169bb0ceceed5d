// This header defines the Lua scripts of the fair lock (fair_lock.h): a
// first-come-first-served queue of waiters beside the plain lock key.
//
// Keys of resource R with prefix P (all in R's Redis Cluster slot, see
// keys.h): P{R} the lock (the same string key SimpleLock uses, so fair and
// plain holders exclude each other), the server's fence mark
// (script_prelude.h), and
//   P{R}:queue   a hash: waiter -> "ticket:expiry_ms" (expiry on the server's
//                TIME), plus the field "#next" (the last ticket handed out).
//                Waiter ids are "<lock instance id>:<wait id>". The lowest
//                ticket among entries not yet expired is the head. The hash
//                gets a PTTL of at least queue_ttl on every enqueue, so a
//                queue whose waiters all died disappears by itself.
// A waiter is notified on the channel WaiterChannelPrefix + instance id
// (ARGV) with the waiter id as the message.
//
//   script        | KEYS             | ARGV                         | reply
//   --------------+------------------+------------------------------+------------------------
//   FairAcquire   | lock, data-set,  | token, ttl_ms, window_ms,    | fence (granted), or
//                 | queue, fence     | waiter ('' = do not queue),  | {'queued', position,
//                 | mark             |                              |
//                 |                  | queue_ttl_ms, channel prefix | waiters} (position 0:
//                 |                  |                              | not queued), or a refusal
//                 |                  |                              | as AcquireScript's
//   FairRelease   | lock, queue      | token, waiter ('' = none),   | 1 deleted the lock,
//                 |                  | channel prefix               | 0 not owner, or the
//                 |                  |                              | PUBLISH error's text
//
// FairAcquire first drops expired entries, then grants the lock only when
// the lock key is free AND (no live waiter is queued OR the caller is the
// head): a newcomer never barges past a live queued waiter. Otherwise, with
// a waiter id, it enqueues the caller (a new ticket) or refreshes its
// entry's expiry to now + queue_ttl (keeping its ticket); if the lock is
// free and another waiter is the head, it notifies that head (it may have
// missed its notification). A grant removes the caller's entry.
// FairRelease deletes the lock if it holds `token`, removes `waiter`'s entry
// if given, and then, if the lock key is free, notifies the live head (and
// nobody else): exactly one process is woken per release.
// Extend is ExtendScript (scripts.h): the lock key is the plain one.
//
// Thread-safe: the Script objects are immutable and live forever.
#ifndef DLOCK_LOCK_FAIR_SCRIPTS_H_
#define DLOCK_LOCK_FAIR_SCRIPTS_H_

#include <vector>

#include "dlock/lock/scripts.h"
#include "dlock/transport/script.h"

namespace dlock {

const Script& FairAcquireScript();
const Script& FairReleaseScript();

// The scripts above, for tools and tests. Not in AllScripts(): the generic
// random-argument differential walk would make their TIME-relative queue
// expiries race the real server's clock; tests/differential's
// FairScriptsMatchARealServer walks them instead, with long TTLs and the
// fake's clock synced to the server's TIME before each step.
std::vector<NamedScript> FairScripts();

}  // namespace dlock

#endif  // DLOCK_LOCK_FAIR_SCRIPTS_H_
