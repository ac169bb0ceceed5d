// This header defines `ReadWriteLock`: a single-server read-write lock.
// Many readers OR one writer hold a resource at a time; each reader and the
// writer hold their own Lease (own random token, own TTL) that expires on
// its own and can be extended -- by hand or by the //watchdog, which takes
// the `reader()` or `writer()` view like any Lock.
//
//   ReadWriteLock rw(&loop, &transport);
//   RetryLock readers(&loop, &rw.reader());     // waiting readers
//   RetryLock writers(&loop, &rw.writer());     // waiting writers
//   readers.Acquire("config", {.ttl = absl::Seconds(10), .wait = ...}, cb);
//
// The two views are `Lock`s: Acquire/Release/Extend with the error table
// of lock.h, the release notifications RetryLock waits on
// (Lock::release_notifier(): the resource's KeyScheme::ChannelKey), and
// they compose with RetryLock, MultiLock, the Watchdog and the blocking
// facade unchanged. Keys and scripts: read_write_scripts.h.
//
// POLICY (writer preference, no writer starvation):
//
//   request | lock state                              | outcome
//   --------+-----------------------------------------+-------------------------
//   read    | free, or only readers                   | granted (fence: the
//           |                                         |   counter's current value)
//   read    | a writer (or plain SimpleLock) holds    | kAborted
//   read    | a writer is waiting (intent marker set) | kAborted, even with readers
//   write   | free (no writer, no live reader)        | granted (fence: counter + 1)
//   write   | a writer holds, or live readers         | kAborted; marks "writer
//           |                                         |   waiting" for writer_intent_ttl
//
// A write attempt that fails sets the writer-intent marker
// (P{R}:writer-waiting, a server-side TTL of `writer_intent_ttl`); every
// later attempt of a waiting writer (RetryLock retries at least every
// `max_backoff`, 1 s by default, and at once when the last reader leaves)
// refreshes it. While it exists no new reader gets in, so the readers drain
// and the writer gets its turn. A writer that crashes or stops waiting
// stops refreshing it: readers are kept out for at most
// `writer_intent_ttl` after its last attempt, never forever. Set
// `writer_intent_ttl` above the waiting writers' retry interval (RetryLock's
// max_backoff), or readers may slip in between two attempts (harmless, the
// writer just waits longer). Zero: no marker (reader preference: writers
// may starve while readers overlap). A TryLock (one attempt) that fails
// also sets it. Readers already holding keep their leases (and may extend
// them); the writer waits until they release or expire.
//
// THE PLAIN LOCK AND THE WRITER. The writer holds exactly the plain lock's
// key (P{R}, a string with the token, PX ttl) and fence counter, so:
//   - a writer and a SimpleLock/RetryLock(SimpleLock) holder of the same
//     resource and prefix exclude each other, and fences increase across
//     both;
//   - readers are excluded by a plain holder too;
//   - but a plain SimpleLock acquire does NOT look at readers: to exclude
//     readers, take the writer() (the `dlock run` command does for every
//     run without --shared);
//   - the writer's Release/Extend are the plain lock's scripts; `dlock
//     unlock` and `dlock status` see a writer as a plain holder.
//
// On the wire the writer's acquire is one MULTI/EXEC transaction where the
// transport has them (write_acquire_tx.h; a script only in the rare cases:
// live readers, a waiting writer's intent, a refused SET, a young data set
// ...), else (a cluster, replica acknowledgement) WriteAcquireScript.
//
// Fences: a writer gets a new, larger fence (the counter is INCRed, as by
// the plain acquire: it increases across writers); a reader gets the
// counter's current value, i.e. the fence of the latest writer (the
// counter's base when none ever wrote: marker x 1000, 0 on a trusted data
// set), so a resource can tell which write a reader read after.
//
// Expiry: each reader's expiry is kept in the readers hash on the server's
// clock and trimmed by every script, so a crashed reader stops counting at
// its own expiry (its lease's ttl after its last acquire/extend), whatever
// the other readers do. The hash itself expires with its latest reader.
//
// Restart rule and unknown outcomes: as SimpleLock's (simple_lock.h). Both
// acquires read the data-set marker and honour `restart_window`; an acquire
// whose outcome is unknown, useless (reply after the deadline) or cancelled
// after sending releases the token it sent, in the background.
//
// Release notifications: the writer's release publishes its token (as the
// plain lock's); the LAST reader's release publishes "released" (waking one
// waiting writer per process). A RetryLock of readers is woken by a writer's
// release (one waiting reader per process and release: the others retry on
// their backoff timers).
//
// Lifetime: `loop` and `transport` must outlive this object and every
// command it has in flight; the views live as long as the object. It may be
// destroyed with operations in flight (they complete normally).
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_READ_WRITE_LOCK_H_
#define DLOCK_LOCK_READ_WRITE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/lease_options.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/lock/replica_ack_options.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// LeaseOptions (lease_options.h: key prefix -- a writer excludes plain
// locks of the same prefix --, command timeout, drift, restart window,
// observer -- policy "read" or "write"), plus the writer's intent and
// replica acknowledgement.
struct ReadWriteLockOptions : LeaseOptions {
  // How long a failed write attempt keeps new readers out (see POLICY).
  // Whole ms; zero: never (reader preference). Must be >= 0.
  absl::Duration writer_intent_ttl = absl::Seconds(3);
  // Replica acknowledgement (off by default; set it with dlock::ReplicaAck(),
  // replica_ack.h), as
  // SimpleLockOptions::replica_ack: a read or write grant, and an extend,
  // counts only once `WAIT min_replicas timeout` confirmed it; too few
  // acknowledgements -> kUnavailable (IsReplicaShortfall) and what the
  // script took is released.
  ReplicaAckOptions replica_ack;
};

class ReadWriteLock {
 public:
  ReadWriteLock(EventLoop* loop, Transport* transport,
                ReadWriteLockOptions options = ReadWriteLockOptions());
  ~ReadWriteLock();

  ReadWriteLock(const ReadWriteLock&) = delete;
  ReadWriteLock& operator=(const ReadWriteLock&) = delete;

  // Shared access. Acquire: a Lease of its own (token, ttl, the current
  // fence); kAborted when a writer holds or waits. Release: kFailedPrecondition
  // when the reader's entry expired or is gone. Extend: the reader's expiry
  // becomes now + ttl; kFailedPrecondition likewise. kInvalidArgument from
  // the call for a bad resource or ttl, or a negative writer_intent_ttl.
  Lock& reader();
  // Exclusive access. Acquire: a Lease with a new fence; kAborted when a
  // writer (or plain holder) or a live reader holds. Release and Extend are
  // the plain lock's.
  Lock& writer();

  const KeyScheme& keys() const;

  struct Core;
  class ReaderView;
  class WriterView;

 private:
  std::shared_ptr<Core> core_;
  std::unique_ptr<ReaderView> reader_;
  std::unique_ptr<WriterView> writer_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_READ_WRITE_LOCK_H_
