// This header defines the Lua scripts behind every dlock lock primitive, as
// `Script` objects (EVALSHA, loaded on each connection before its first use:
// docs/script-order.md). Each script does its
// compare-and-act in one atomic step on the server.
//
// They are public so the fake's differential test can run every dlock script
// on both the in-memory FakeRedis and a real redis-server and compare the
// replies (`AllScripts()` lists them with the KEYS/ARGV they expect).
//
// Key layout (see keys.h): P{R} is the lock key, P{R}:released the release
// channel (passed as an ARGV, since a channel is not a key), P"fence-hwm"
// the server's fence high-water mark (per slot on a Cluster); P{R}:fence,
// the per-resource counter of earlier releases, is no longer read (an
// upgrade: docs/fences.md). Fences: script_prelude.h
// (FENCES) -- the rule, and what it assumes of the server's TIME.
//
// Replies (every script, by construction, raises an error only when a key
// holds data of an unexpected type, e.g. a fence key that is not an integer,
// or when the user may not run a command it calls -- except PUBLISH, see (*)):
//
//   script                   | KEYS          | ARGV                  | reply
//   -------------------------+---------------+-----------------------+-------------------------
//   AcquireScript            | lock,         | token, ttl_ms,        | fence (integer >= 1), nil
//                            | data-set,     | window_ms             | when held, or a refusal
//                            | fence mark    |                       |
//   AcquireAfterTxScript     | as Acquire-   | token, ttl_ms,        | as AcquireScript (the rare
//                            | Script        | window_ms, tx fence   | path of FencedAcquireTx,
//                            |               |                       | lease_command.h)
//   AcquireUnfencedScript    | lock,         | token, ttl_ms,        | 0 (granted, no fence), nil
//                            | [data-set]    | window_ms             | when held, or a refusal
//                            | (window on)   |                       |
//   ReleaseScript            | lock          | token, channel        | 1 deleted (+PUBLISH), 0 not owner,
//                            |               |                       | or a string (*)
//   ExtendScript             | lock          | token, ttl_ms         | 1 PEXPIREd to ttl, 0 not owner
//   ExtendOrReacquireScript  | lock          | token, ttl_ms         | 1 extended or re-set, 0 other
//   ReentrantAcquireScript   | lock,         | owner, ttl_ms,        | {count, fence}, nil when
//                            | marker,       | window_ms             | another owner holds, or a
//                            |               |                       | refusal
//                            | data-set,     |                       |
//                            | fence mark    |                       |
//   ReentrantReleaseScript   | lock          | owner, channel        | count left (0: deleted and
//                            |               |                       | published), -1 not owner,
//                            |               |                       | or a string (*)
//   ReentrantExtendScript    | lock          | owner, ttl_ms         | 1 TTL raised to ttl if it
//                            |               |                       | was shorter (never lowered),
//                            |               |                       | 0 not owner
//   ReentrantUndoScript      | lock, marker  | owner, channel        | 1 undid that acquire, 0 nothing,
//                            |               |                       | or a string (*)
//
// The read-write lock's scripts (ReadAcquire, WriteAcquire, ReadRelease,
// ReadExtend) are declared in read_write_scripts.h, with their table; they
// are listed in AllScripts() too.
//
// (*) The key was deleted but the PUBLISH on the channel was refused (an ACL
// user without channel permission; scripts cannot roll back the DEL): the
// reply is the PUBLISH error's text, e.g. "ERR The user executing the script
// can't publish to the channel mentioned in the command". Waiters are not
// woken by a notification (they retry on their backoff timers).
//
// With a restart window > 0 the acquire scripts apply the restart rule on
// the data-set marker (P"data-set-began", KeyScheme::DataSetKey: when this
// server's data set began, Unix ms), created with the server's TIME when
// missing (Redis >= 7: TIME before a write needs script effects
// replication): AcquireUnfencedScript before its SET; AcquireScript (and
// the writer) after taking the lock key and the fence, reading the marker
// only when TIME is less than the window past the mark, and deleting the
// lock key again on a refusal (script_prelude.h,
// DLOCK_RESTART_RULE_AFTER_FENCE). With a window of 0 they read neither
// TIME nor the marker (but for a missing fence mark). Both acquires send
// SET NX PX GET (Redis >= 7.0). Refusals,
// as arrays (AcquireRefusalStatus):
//   {'young', ms_left, age_ms}   window_ms > 0 and the marker is younger
//   {'foreign', type, -1|0}      the lock key holds another type, or a
//                                lock-type key with no TTL (-1: no TTL)
//   {'foreign', 'marker', value} the marker is not a time in ms
//   {'exhausted', value, key}    the fence mark is at 2^53 - 1 or above (the
//                                last integer a Lua reply carries exactly)
// A missing fence mark starts at the server's TIME in us (or the marker x
// 1000 if that is larger), or at 0 for a trusted marker (fences from 1):
// script_prelude.h, FENCES.
//
// The reentrant hash keeps its holding's fence in the field '#fence'.
// The reentrant marker (P{R}:acquire:<request id>, PX ttl) is set by every
// counted ReentrantAcquire so an acquire whose reply was lost can be undone
// at most once and only if it really ran (see reentrant_lock.h).
// A key of the other kind (a hash where a string is expected or vice versa)
// is foreign data to the acquire scripts (never overwritten, never deleted)
// and "not owner" to the others.
//
// Thread-safe: the Script objects are immutable and live forever.
#ifndef DLOCK_LOCK_SCRIPTS_H_
#define DLOCK_LOCK_SCRIPTS_H_

#include <vector>

#include "dlock/transport/script.h"

namespace dlock {

const Script& AcquireScript();
const Script& AcquireAfterTxScript();
const Script& AcquireUnfencedScript();
const Script& ReleaseScript();
const Script& ExtendScript();
const Script& ExtendOrReacquireScript();
const Script& ReentrantAcquireScript();
const Script& ReentrantReleaseScript();
const Script& ReentrantExtendScript();
const Script& ReentrantUndoScript();

// The message a reentrant release publishes on the resource's channel when
// the last hold ends. A simple (and RedLock) release publishes the released
// lease's token instead: it is worthless once the key is deleted, and lets
// a RetryLock tell its own releases' notifications from others'.
inline constexpr char kReleasedMessage[] = "released";

struct NamedScript {
  const char* name;       // e.g. "acquire"
  const Script* script;   // never null; lives forever
  int num_keys;           // how many KEYS it takes (the rest are ARGV)
};

// Every script above, for tools and the differential test.
std::vector<NamedScript> AllScripts();

}  // namespace dlock

#endif  // DLOCK_LOCK_SCRIPTS_H_
