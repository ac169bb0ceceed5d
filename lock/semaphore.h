// This header defines `Semaphore`: N permits per resource across processes,
// each permit an expiring lease of its own. It is a `Lock`, so everything
// built on locks works with it unchanged:
//   - waiting: wrap it in a RetryLock (woken by release notifications, one
//     waiter per release, see retry_lock.h);
//   - renewal: hand its leases to a Watchdog (it calls Extend);
//   - threads: the blocking facade (BlockingClient::Semaphore, or
//     BlockingLock over a RetryLock over a Semaphore).
//
//   SemaphoreOptions options;
//   options.permits = 3;                      // at most 3 holders of "db-pool"
//   Semaphore pool(&loop, &transport, options);
//   RetryLock waiting(&loop, &pool);          // acquire-with-wait
//   waiting.Acquire("db-pool", {.ttl = absl::Seconds(30), .wait = absl::Seconds(5)},
//       [](absl::StatusOr<Lease> permit) { ... });
//
// A permit (Lease): `token` is fresh random (>= 128 bits) per permit, so a
// holder releases or extends exactly its own permit; `fence` increases
// across all permits of the resource (one fencing counter per resource, as
// for the mutex); `ttl`/`deadline` as for every lease (lock.h): the local
// deadline counts from the send, minus the drift allowance.
//
// On the server (semaphore_scripts.h): one sorted set P{R} of the holders'
// tokens scored by their expiry (server TIME + ttl, ms), trimmed of expired
// permits by every script. So a crashed holder's permit comes back when its
// TTL has passed, nobody has to release it.
//
// Outcomes of Acquire (ONE attempt; `options.wait` and `task_id` ignored):
//
//   outcome                                  | result
//   -----------------------------------------+------------------------------
//   fewer than `permits` live holders        | Lease (token, fence, deadline)
//   `permits` or more live holders           | kAborted
//   anything but a sorted set under P{R}     | kInternal "foreign data ..."
//     (e.g. a SimpleLock's key of the same   |
//     resource name)                         |
//   young data set (restart_window),         | as SimpleLock (simple_lock.h)
//   exhausted fence, error replies, no       |   -- the same table, the same
//   reply, connection down, late reply       |   background release of the
//                                            |   token after an unknown outcome
//
// Release: OK (removed; the release channel P{R}:released gets the token,
// which wakes one waiter of a RetryLock), kFailedPrecondition (this permit
// expired or was never granted; nothing touched). Extend: the permit's
// expiry becomes now + ttl on the server; kFailedPrecondition if it already
// expired. Bad input -- `permits` outside [1, kMaxPermits], a bad resource
// or ttl -- returns kInvalidArgument from the call (the callback never runs).
//
// Changing N. `permits` is not stored on the server: every acquire carries
// its own and is granted while fewer than that many permits are live. So N
// can change while permits are held (a new Semaphore object, a new
// deployment): lowering it revokes nothing -- no new holder gets in until
// enough holders have left (released or expired) to be below the new N;
// raising it admits new holders at once. While processes with different N
// run side by side, each admits by its own N (never more than the largest
// N hold at once). Use one N per resource in steady state.
//
// Lifetime: `loop` and `transport` must outlive this object and every
// command it has in flight; the Semaphore may be destroyed with operations
// in flight (they complete normally; background cleanups stop and their
// permits expire by their TTL), as for SimpleLock.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_LOCK_SEMAPHORE_H_
#define DLOCK_LOCK_SEMAPHORE_H_

#include <cstdint>
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
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {

// The largest `permits` accepted.
inline constexpr int64_t kMaxPermits = 1000000;

// LeaseOptions (lease_options.h: key prefix -- all users of a semaphore
// need the same one --, command timeout, drift, restart window -- no permit
// from a young data set --, observer -- policy "semaphore"), plus the
// number of permits.
struct SemaphoreOptions : LeaseOptions {
  // How many permits of a resource may be held at once: [1, kMaxPermits].
  int64_t permits = 1;
};

class Semaphore : public Lock, private ReleaseNotifier {
 public:
  Semaphore(EventLoop* loop, Transport* transport,
            SemaphoreOptions options = SemaphoreOptions());
  ~Semaphore() override;

  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // One attempt at a permit; see the table above. Cancel() on the handle:
  // the callback never runs and a permit the command took is released.
  absl::StatusOr<AcquireHandle> Acquire(absl::string_view resource,
                                        const AcquireOptions& options,
                                        LeaseCallback callback) override;
  // Gives the permit back (by its token); see above.
  absl::Status Release(const Lease& lease, StatusCallback callback) override;
  // Sets the permit's expiry to now + `ttl`; see above.
  absl::Status Extend(const Lease& lease, absl::Duration ttl,
                      LeaseCallback callback) override;

  int64_t permits() const;
  const KeyScheme& keys() const;

  // Releases publish the token on KeyScheme::ChannelKey over this
  // semaphore's transport.
  const ReleaseNotifier* release_notifier() const override { return this; }

  struct Core;

 private:
  std::string ReleaseChannel(absl::string_view resource) const override;
  Transport* ReleaseSubscriber() const override;

  std::shared_ptr<Core> core_;
};

}  // namespace dlock

#endif  // DLOCK_LOCK_SEMAPHORE_H_
