// This header defines the cross-client wait queue with which a release hands
// the lock to ONE waiter of another client (RetryLock over a lock whose
// ReleaseNotifier supports it: SimpleLock), and its scripts. Internal to
// //lock. Design and measurements: docs/handoff.md.
//
// Keys of resource R, named after its release channel C (KeyScheme::
// ChannelKey: P{R}:released, or P#{T}:released:R), so they share its slot:
//   C:q   sorted set  waiter id -> ticket (server time in us at joining,
//                     strictly increasing): the queue, oldest first
//   C:qx  sorted set  waiter id -> expiry (server ms): an entry not
//                     refreshed by then is dead and skipped
// Both carry a PX TTL at least as long as their longest-lived entry: once
// the waiters are gone nothing is left. Every script below takes every key
// it touches in KEYS; none derives a key from ARGV.
//
// Only clients that met contention on R name these keys: the queue is
// joined by a waiter after a refused attempt, and HandOffReleaseScript is
// sent instead of the plain release only by a RetryLock that met contention
// on R moments ago -- its waiter was refused, or its last release's PUBLISH
// reached another client's waiter (CountingReleaseScript). A lock nobody
// waits for is released with the lock key alone in KEYS and the plain
// release's three commands, exactly as before.
//
// The hand-off: HandOffReleaseScript deletes the lock key (compare first)
// and, if the queue holds a live entry W, marks W granted -- its expiry
// becomes now + DLOCK_HANDOFF_GRACE_MS -- and publishes "w:" W on W's own
// channel C ":w:" W (HandOffChannel) instead of the released token on C:
// only W's client hears it (a release costs the other waiting clients
// nothing, however many they are). W stays at the head of the queue, so a queued
// client's join that finds the key free but a live head that is not itself
// queues behind it rather than attempting (no barging by queued clients).
// Only W's client attempts; W's entry leaves the queue with W's own release
// (ARGV self id). A W that died or gave up without leaving stops counting
// once its grant expires; the next join or refresh then skips it.
#ifndef DLOCK_LOCK_HANDOFF_SCRIPTS_H_
#define DLOCK_LOCK_HANDOFF_SCRIPTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/script.h"

// How long a handed-off waiter keeps its place at the head (ms) before it
// counts as dead.
#define DLOCK_HANDOFF_GRACE_MS "200"

namespace dlock {

inline constexpr char kHandOffMessagePrefix[] = "w:";

// The channel on which the waiter `id` of release channel `channel` hears
// its hand-offs: channel + ":w:" + id (a channel, not a key).
std::string HandOffChannel(absl::string_view channel, absl::string_view id);

// The queue keys of the release channel `channel` (see above).
std::string HandOffQueueKey(absl::string_view channel);        // channel + ":q"
std::string HandOffQueueExpiryKey(absl::string_view channel);  // channel + ":qx"

// A release that hands off.
//   KEYS: lock key, C:q, C:qx.
//   ARGV: token, channel C, self id ('' for none), rejoin ('1': the caller
//         still has waiters of R: its entry goes back at the tail), entry
//         ttl ms (for a rejoin).
// If the lock key holds the token: deletes it, removes the self entry, and
// hands off to the oldest live entry (dead ones met on the way are removed,
// at most 16) by publishing "w:<id>"; with no live entry publishes the token
// as ReleaseScript does. Replies as ReleaseScript -- 1 released, 0 not
// ours, or the PUBLISH error's text -- but 2 when released, handed off and
// the self entry put back at the tail (rejoin).
const Script& HandOffReleaseScript();

// The plain release of a RetryLock that may learn of contention from it:
// ReleaseScript's work exactly (KEYS: the lock key alone; GET, DEL,
// PUBLISH), replying 1 + the number of clients the PUBLISH reached
// (subscribers of C: other clients' waiters) instead of 1; 0 not ours; or
// the PUBLISH error's text.
const Script& CountingReleaseScript();

// A waiter's side.
//   KEYS: lock key, C:q, C:qx.  ARGV: waiter id, entry ttl ms, mode.
//   mode "join": if the lock key is free and the oldest live entry is this
//     id or there is none: replies 0 (attempt now; this id stays queued, at
//     the head, until its release). Otherwise joins at the tail (an entry
//     already there keeps its place) or refreshes its expiry to now + ttl:
//     replies 1 (queued: wait for "w:<id>").
//   mode "leave": removes the entry; if the lock key is free, hands off to
//     the oldest live entry as a release would (publishes "w:<id>"): 0.
const Script& HandOffQueueScript();

// The scripts above, for tests.
std::vector<NamedScript> HandOffScripts();

}  // namespace dlock

#endif  // DLOCK_LOCK_HANDOFF_SCRIPTS_H_
