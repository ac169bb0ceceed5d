// Internal to //redlock (namespace redlock_internal): what every RedLock
// operation shares -- the servers with their restart detection
// (run_id_tracker.h), the options and the timeouts derived from them, the
// observer, and the set of pending operations (`Core`) -- and the base of
// those operations (`Op`). Not part of the API.
#ifndef DLOCK_REDLOCK_CORE_H_
#define DLOCK_REDLOCK_CORE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/observer.h"
#include "dlock/redlock/redlock.h"
#include "dlock/redlock/run_id_tracker.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace redlock_internal {

inline constexpr char kPolicy[] = "redlock";

struct Server {
  std::unique_ptr<LockCommands> commands;
  Transport* transport = nullptr;
  std::string name;
};

// An operation with a user callback pending.
class Op : public Cancellable, public std::enable_shared_from_this<Op> {
 public:
  // The RedLock is being destroyed: end now, post kCancelled to the user.
  virtual void Shutdown() = 0;
};

// The callback of a release command sent to server `server` (ReleaseOp's
// round and re-sends, ExtendOp's second release, an acquire attempt's
// release): ONE type for all of them, so //redlock compiles the release
// command's send once. `op` keeps the operation alive until the reply; `on`
// gets this and the release's status; the other fields are what `on` needs.
struct ReleaseReply {
  using Handler = void (*)(const ReleaseReply& reply, const absl::Status& status);
  void operator()(const absl::StatusOr<ReleaseNotice>& notice) const {
    on(*this, notice.status());
  }

  std::shared_ptr<Op> op;
  Handler on = nullptr;
  size_t server = 0;
  void* target = nullptr;  // what `on` works on, when not `op` itself
  int64_t number = 0;      // an attempt, a round's generation
  uint32_t track = 0;
  absl::Time sent_at;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(EventLoop* loop, RedLockOptions options, int quorum,
       const std::vector<Transport*>& transports);

  EventLoop* loop() const { return loop_; }
  const RedLockOptions& options() const { return options_; }
  int quorum() const { return quorum_; }
  size_t n() const { return servers_.size(); }
  LockObserver* observer() const { return observer_; }
  Server& server(size_t i) { return servers_[i]; }
  const Server& server(size_t i) const { return servers_[i]; }

  // ttl x drift_factor + kDefaultDriftConstant (lease_rules.h: 2 ms).
  absl::Duration Drift(absl::Duration ttl) const;
  // The per-server deadline (see RedLockOptions::server_timeout).
  absl::Duration Timeout(absl::Duration ttl) const;
  // The per-server deadline of Release (RedLockOptions::release_timeout).
  absl::Duration ReleaseTimeout(absl::Duration ttl) const;
  // retry_delay +/- retry_jitter, at least 0.
  absl::Duration RetryDelay();

  // Who each server is: restarts, duplicates, whether a vote counts.
  RunIdTracker& run_ids() { return *run_ids_; }
  const RunIdTracker& run_ids() const { return *run_ids_; }

  // OnServerVote for server i.
  void ReportVote(absl::string_view resource, absl::string_view operation,
                  size_t i, const absl::Status& status, absl::Duration latency);
  // OnLateGrant for server i (see LATE GRANTS in redlock.h).
  void ReportLateGrant(absl::string_view resource, absl::string_view operation,
                       absl::string_view reason, size_t i);

  // LATE GRANTS (redlock.h). An operation whose grants of a lease may still
  // arrive -- an Acquire that succeeded before every server answered, an
  // Extend with replies outstanding -- watches the lease's token while they
  // may; Release of that token sets `released` on every watch of it, and the
  // operation releases again what it is granted after that. A watch must be
  // unwatched before it is destroyed.
  struct GrantWatch {
    absl::string_view token;  // the watching operation keeps the bytes
    bool released = false;
  };
  void Watch(GrantWatch* watch) { watches_.push_back(watch); }
  void Unwatch(GrantWatch* watch);
  // Release(lease) was called: marks its watches, and remembers the token
  // (among the last kRememberedReleases releases) until `ttl` from now, for
  // WasReleased.
  void NoteReleased(absl::string_view token, absl::Duration ttl);
  // Whether `token` was released, while remembered: Extend refuses it.
  bool WasReleased(absl::string_view token) const;
  static constexpr size_t kRememberedReleases = 64;

  void Register(std::shared_ptr<Op> op);
  void Unregister(Op* op) { active_.erase(op); }
  // The RedLock is being destroyed: every pending operation ends, and the
  // observer is never called again.
  void Shutdown();

 private:
  EventLoop* const loop_;
  const RedLockOptions options_;
  const int quorum_;
  // The caller's observer while the RedLock lives; NoopLockObserver() after
  // Shutdown, because background releases can outlive the RedLock (and the
  // observer, which the caller only keeps as long as the RedLock).
  LockObserver* observer_;
  std::vector<Server> servers_;
  // Refers to options_ (declared above, so it is destroyed first).
  const std::shared_ptr<RunIdTracker> run_ids_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<Op*, std::shared_ptr<Op>> active_;
  // The watches (a few: operations in flight), unordered.
  std::vector<GrantWatch*> watches_;
  // The last kRememberedReleases releases, a ring; slots keep their
  // capacity, so remembering a token allocates nothing.
  struct Released {
    std::string token;
    absl::Time forget_at = absl::InfinitePast();
  };
  std::vector<Released> released_;
  size_t next_released_ = 0;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_CORE_H_
