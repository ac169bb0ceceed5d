// This header defines `BlockingClient`: the one-call entry point for an
// ordinary threaded program. It owns everything a blocking lock needs -- a
// loop thread, one connection (`Transport`) per Redis server, the lock
// policy and the blocking facade -- and hands out RAII `LockGuard`s.
//
// Two ways to build one:
//   - `ConnectBlockingClient(options)` (dlock/blocking/connect.h, target
//     //blocking:connect): from Redis URLs; the client starts its own
//     UvLoopThread and one UvTransport (plain, TLS, Sentinel, Cluster) per
//     URL. That target links libuv, hiredis and OpenSSL.
//   - `BlockingClient::Create(thread, make_transports, options)` (this
//     header, target //blocking:blocking_client): over any transports (the
//     fake included) the caller makes, on a loop thread the caller runs.
//     This target links no network stack (tools/check_deps checks it).
//     Everything below holds for both.
//
//   ConnectOptions options;                       // BlockingClientOptions +
//   options.redis_urls = {"redis://127.0.0.1:6379"};  // URLs and TLS
//   absl::StatusOr<std::unique_ptr<BlockingClient>> client =
//       ConnectBlockingClient(options);
//   if (!client.ok()) return client.status();    // kUnavailable: no server
//   absl::StatusOr<LockGuard> guard =
//       (*client)->Lock("orders/42", absl::Seconds(10), absl::Seconds(3));
//   if (!guard.ok()) return guard.status();      // kDeadlineExceeded: busy
//   Ship(order, guard->lease().fence);           // renewed while held
//   // ~LockGuard releases the lock.
//
// Policy stack, built on the loop thread:
//
//   servers    | reentrant | lock under the facade
//   -----------+-----------+------------------------------------------------
//   one        | false     | RetryLock(SimpleLock)
//   one        | true      | RetryLock(ReentrantLock): nested locks on one
//              |           | thread count up (owner = this client + thread)
//   N > 1      | false     | RetryLock(RedLock over N independent servers,
//              |           | quorum N/2+1, one voting round per attempt)
//   one,       | false     | FairLock: waiters queue on the server and are
//   fair=true  |           | served first-come-first-served across
//              |           | processes; a release wakes only the next one
//              |           | (dlock/lock/fair_lock.h)
//
// The facade is a `BlockingLock` (dlock/blocking/blocking_lock.h). With
// `auto_renew` (the default) a watchdog renews each guard's lease while it is
// held and `LockGuard::IsValid()` turns false if the lease is lost;
// without, the lease simply expires after its ttl (extend it with
// `facade().Extend`).
//
// Outcomes of TryLock/Lock: a guard; kAborted (TryLock: held by another
// owner); kDeadlineExceeded (Lock: still held when `wait` ran out);
// kUnavailable (server(s) unreachable, or no quorum); kInvalidArgument (bad
// resource or ttl); kCancelled (the client is being destroyed). See
// dlock/blocking/blocking_lock.h for the guard's own contract.
//
// Thread-safety: TryLock/Lock/facade() may be called from any number of
// threads at once, but never from the client's loop thread (e.g. inside an
// on_lost hook or an observer event): that returns kFailedPrecondition.
// With ConnectBlockingClient (a UvLoopThread) each call does its I/O on the
// calling thread (caller turns, dlock/transport/uv/uv_loop_thread.h), so
// hooks and observer events run on whichever thread runs the loop then --
// possibly a thread inside another TryLock/Lock -- and the client's own
// thread renews leases and handles I/O while no call is running.
//
// Lifetime and destruction. The destructor may run while other threads
// are inside TryLock/Lock/facade() calls or a guard's Unlock: every call
// that began before the destructor did returns its real result or
// kCancelled ("the client is being destroyed"); none crashes or hangs.
// Calls that begin after the destructor began return kCancelled for as long
// as the object exists; beginning a call after it returned is a
// use-after-destroy bug, as with any object (e.g. join your threads, or make
// them stop on kCancelled, before freeing the memory they use). Guards may
// outlive the client: their Unlock()/destructor returns kCancelled and
// touches nothing. The destructor, in order:
//   1. cancels every Lock/TryLock in flight (callers get kCancelled; a
//      token an attempt in flight may have taken is released);
//   2. stops renewing and RELEASES every lease still held by a guard (the
//      guard's IsValid() turns false: stop using the resource), and waits
//      for those releases and for every call that had begun to return;
//   3. waits for every command still in flight on every connection to be
//      answered -- with the policies still alive, so what a reply calls
//      for (a late grant's re-release, a NOSCRIPT fallback's EVAL) is sent
//      and waited for too. This is what finishes releases that returned
//      before every server answered: RedLock's Release (a guard's Unlock
//      included) reports at quorum, and the other servers' releases are
//      still on the wire; a client destroyed right after an Unlock still
//      deletes the key on every server that answers;
//   4. destroys the policies, waits for what their destruction sent,
//      closes the connections (`Transport::Close`) and destroys them on the
//      loop thread, and -- when the client started the loop thread itself
//      (ConnectBlockingClient) -- joins it.
// Steps 3 and 4 wait at most `command_timeout` in all (the release
// timeout; only for transports that report `pending_commands()`, which
// every dlock transport does). A release or cleanup that gets no answer
// within that bound (server down or stalled) leaves its key to expire by
// its TTL.
#ifndef DLOCK_BLOCKING_BLOCKING_CLIENT_H_
#define DLOCK_BLOCKING_BLOCKING_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_lock.h"
#include "dlock/blocking/multi_lock_guard.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/observer.h"
#include "dlock/transport/loop_thread.h"
#include "dlock/transport/transport.h"

namespace dlock {

struct ConnectOptions;  // connect.h
namespace blocking_internal {
class ClientConnections;  // client_connections.h
class ClientLocks;        // client_locks.h
}  // namespace blocking_internal

// How the client behaves, whatever made its transports. Where the servers
// are (URLs, TLS) is ConnectOptions' part (connect.h), which derives from
// this.
struct BlockingClientOptions {
  // How long Create/ConnectBlockingClient wait for the connection (RedLock:
  // for a quorum of them).
  absl::Duration connect_timeout = absl::Seconds(5);

  // Prefix of every key. Clients that must exclude each other need the same
  // prefix.
  std::string key_prefix = "dlock:";

  // True: guards are renewed by a watchdog while held (BlockingLockOptions::auto_renew).
  // False: a guard's lease expires after its ttl (BlockingLock).
  bool auto_renew = true;

  // True: a ReentrantLock (single server only; kInvalidArgument with
  // several servers). Nested TryLock/Lock of one resource on one thread
  // succeed; each guard releases one level.
  bool reentrant = false;

  // True: a FairLock (single server only, not reentrant; kInvalidArgument
  // otherwise). Lock() queues on the server: waiters of all processes using
  // fair clients on this prefix get the resource in the order they asked; a
  // waiter that dies holds the line for at most `fair_queue_ttl` after its
  // last refresh. TryLock() never queues and never barges past a waiter.
  bool fair = false;
  absl::Duration fair_queue_ttl = absl::Seconds(3);

  // Bound on each round trip of the single-server policies (RedLock uses its
  // own per-server deadline, min(ttl / 10, 50 ms)).
  absl::Duration command_timeout = absl::Seconds(2);

  // Replica acknowledgement (single server only; kInvalidArgument with
  // several URLs): a grant or extend (watchdog renewals included) counts only
  // after `WAIT min_replicas replica_ack_timeout` confirmed it; too few: the
  // key is released and the call fails with kUnavailable
  // (IsReplicaShortfall, dlock/lock/replica_ack.h). 0: off. Covers Lock,
  // ReadLock/WriteLock and MultiLock; with `fair` it is kInvalidArgument and
  // Semaphore() refuses it (kInvalidArgument): their scripts do not wait.
  int min_replicas = 0;
  absl::Duration replica_ack_timeout = absl::Milliseconds(500);

  // Receives the policies' and the watchdog's events, on the loop thread
  // (whichever thread runs the loop; see "Thread-safety" above).
  // Not owned; must outlive the client. Null: none.
  LockObserver* observer = nullptr;
};

class BlockingClient {
 public:
  // Makes the client's transports, one per server, on the loop thread; each
  // must be bound to `loop` (the loop thread's EventLoop).
  using TransportFactory =
      absl::AnyInvocable<absl::StatusOr<std::vector<std::unique_ptr<Transport>>>(
          EventLoop* loop) &&>;

  // Builds a client over caller-made transports: runs `make_transports` once
  // on `thread`'s loop thread, takes ownership of what it returns, waits for
  // the connection(s) with `Transport::Connect` (RedLock: a quorum, within
  // `connect_timeout`), then builds the policy stack of the table above
  // (one transport: single-server lock; several: RedLock). Servers are
  // named "server 0", "server 1", ... in messages. `thread` is borrowed: it
  // must outlive the client and run posted functions until the client's
  // destructor returned (which closes and destroys the transports on it).
  // Returns:
  //   kInvalidArgument: null `thread` or `make_transports`, a non-positive
  //     timeout, no transport or a null one, an option that needs a single
  //     server (`reentrant`, `fair`, `min_replicas`) with several
  //     transports, or the factory's own error;
  //   kUnavailable: the transport (RedLock: a quorum of them) did not
  //     connect within `connect_timeout`; the message names each server
  //     and why;
  //   kFailedPrecondition: called on `thread`'s loop thread;
  //   kCancelled: `thread` is stopping.
  static absl::StatusOr<std::unique_ptr<BlockingClient>> Create(
      LoopThread* thread, TransportFactory make_transports, BlockingClientOptions options);

  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;
  // See "Lifetime and destruction" above.
  ~BlockingClient();

  // One attempt: a guard, or kAborted when another owner holds `resource`.
  absl::StatusOr<LockGuard> TryLock(absl::string_view resource, absl::Duration ttl);

  // Waits up to `wait` for `resource` (woken by release notifications, with
  // a jittered backoff as a fallback): a guard, or kDeadlineExceeded.
  absl::StatusOr<LockGuard> Lock(absl::string_view resource, absl::Duration ttl,
                                 absl::Duration wait);

  // Read-write lock (single server only; dlock/lock/read_write_lock.h):
  // shared and exclusive guards of `resource`, waiting up to `wait` (zero:
  // one attempt), renewed like any guard (auto_renew). Many ReadLocks of a
  // resource are held at once; a WriteLock excludes readers, writers and
  // plain Locks of it (the writer holds the plain lock's key) and, while it
  // waits, keeps new readers out. Outcomes as Lock (kAborted /
  // kDeadlineExceeded when busy); kInvalidArgument with several servers.
  absl::StatusOr<LockGuard> ReadLock(absl::string_view resource, absl::Duration ttl,
                                     absl::Duration wait);
  absl::StatusOr<LockGuard> WriteLock(absl::string_view resource, absl::Duration ttl,
                                      absl::Duration wait);

  // All-or-nothing over several resources with this client's policy
  // (BlockingLock::AcquireAll: sorted order, `wait` for the whole set,
  // everything released on failure before it returns). kInvalidArgument
  // for an empty list or a duplicate.
  absl::StatusOr<MultiLockGuard> MultiLock(std::vector<std::string> resources,
                                           absl::Duration ttl, absl::Duration wait);
  // A permit of `resource`, of which at most `permits` are held at once
  // across every process (dlock/lock/semaphore.h): waits up to `wait` (zero:
  // one attempt), woken by releases. The guard's lease is the permit (own
  // token, fence, ttl), renewed while held with `auto_renew`; ~LockGuard
  // gives it back. kDeadlineExceeded (kAborted with wait 0): all permits
  // held; kInvalidArgument: `permits` outside [1, kMaxPermits], a bad
  // resource or ttl, a client of several servers (a semaphore needs one),
  // or min_replicas set (semaphores do not wait for replicas).
  absl::StatusOr<LockGuard> Semaphore(absl::string_view resource, int64_t permits,
                                      absl::Duration ttl, absl::Duration wait);

  // The blocking facade, for Acquire with full options and Extend.
  BlockingLock& facade();

  // Number of servers (1, or N for RedLock).
  size_t server_count() const { return server_count_; }

 private:
  // Builds a client that owns its loop thread (joined last).
  friend absl::StatusOr<std::unique_ptr<BlockingClient>> ConnectBlockingClient(
      ConnectOptions options);

  BlockingClient(BlockingClientOptions options, std::unique_ptr<LoopThread> owned_thread,
                 LoopThread* thread);
  // Creates the transports on the loop thread and waits for the connection
  // (or a quorum), then builds the policies and the facades.
  absl::Status Start(TransportFactory make_transports, std::vector<std::string> names);

  BlockingClientOptions options_;
  // ConnectBlockingClient: the loop thread the client started (joined
  // last). Create: null.
  std::unique_ptr<LoopThread> owned_thread_;
  LoopThread* thread_;
  size_t server_count_ = 0;
  // The transports: made, used and destroyed on the loop thread.
  std::unique_ptr<blocking_internal::ClientConnections> connections_;
  // The policies and facades over them; null until Start built them.
  std::unique_ptr<blocking_internal::ClientLocks> locks_;
};

}  // namespace dlock

#endif  // DLOCK_BLOCKING_BLOCKING_CLIENT_H_
