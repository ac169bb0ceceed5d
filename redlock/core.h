// Internal to //redlock (namespace redlock_internal): what every RedLock
// operation shares -- the servers with their restart-detection state, the
// options, the observer, and the set of pending operations (`Core`) -- and
// the base of those operations (`Op`). Not part of the API.
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
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace redlock_internal {

inline constexpr absl::Duration kDriftConstant = absl::Milliseconds(2);
inline constexpr char kPolicy[] = "redlock";

// A failure of the server or of the way to it (as opposed to an answer
// about the key): after one, the server's run_id is checked again.
bool IsServerFailure(const absl::Status& s);

struct Server {
  std::unique_ptr<LockCommands> commands;
  Transport* transport = nullptr;
  std::string name;
  // Restart detection (see RESTART SAFETY in redlock.h).
  std::string run_id;
  bool probe_needed = true;
  bool probe_supported = true;
  // INFO probes are numbered; the highest one answered with a run_id.
  // Replies on one connection come in order, so when a lock command's
  // reply arrives, the probe queued ahead of it succeeded iff
  // last_ok_probe >= its number.
  uint64_t next_probe = 1;
  uint64_t last_ok_probe = 0;
  // The transport's connection_epoch() on which a probe was sent and
  // answered (0: none). Until that connection breaks the server cannot
  // have restarted, so lock commands on it need no probe of their own.
  uint64_t verified_epoch = 0;
  int restarts = 0;
  absl::Time restart_seen = absl::InfinitePast();
  // From the last "young data set" refusal: when it stops being young.
  absl::Time young_until = absl::InfinitePast();
};

// What restart detection did for one lock command: the INFO probe queued
// ahead of it (id 0: none) and the connection it went out on.
struct Probe {
  uint64_t id = 0;
  uint64_t epoch = 0;
};

// An operation with a user callback pending.
class Op : public Cancellable, public std::enable_shared_from_this<Op> {
 public:
  // The RedLock is being destroyed: end now, post kCancelled to the user.
  virtual void Shutdown() = 0;
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

  // ttl x drift_factor + 2 ms.
  absl::Duration Drift(absl::Duration ttl) const;
  // The per-server deadline (see RedLockOptions::server_timeout).
  absl::Duration Timeout(absl::Duration ttl) const;
  // The per-server deadline of Release (RedLockOptions::release_timeout).
  absl::Duration ReleaseTimeout(absl::Duration ttl) const;
  // The delayed-restart window (0 when the rule is off).
  absl::Duration RestartWindow() const;
  // retry_delay +/- retry_jitter, at least 0.
  absl::Duration RetryDelay();

  // kInvalidArgument once two servers turned out to be one Redis instance
  // (same run_id), else OK.
  const absl::Status& misconfigured() const { return misconfigured_; }

  // Server i refused an acquire because its data set is young.
  void NoteYoung(size_t i, const absl::Status& status);

  // Whether a vote of server i, arriving at `now`, counts, for a command
  // sent with `probe`. With the delayed-restart rule, a grant counts only
  // from a server whose run_id is confirmed for that command -- by the INFO
  // queued ahead of it, or because it went out and came back on a
  // connection already confirmed -- and not quarantined by a restart.
  bool Counted(size_t i, absl::Time now, const Probe& probe) const;

  // Called before an acquire or extend is sent to server i: queues an
  // `INFO server` ahead of it (same connection, so its answer describes the
  // server that runs the command) when the run_id must be (re)checked:
  // on first use, after a failure, on every new connection, and -- with
  // the delayed-restart rule -- whenever the transport cannot name its
  // connection or `check_run_id_every_command` is set. An acquire
  // (`gates_votes` false) needs the run_id only to tell one instance listed
  // twice: it probes on first use, after a failure and on a new connection,
  // never per command.
  Probe BeforeLockCommand(size_t i, absl::Duration timeout, bool gates_votes);

  // After any reply of server i: a server failure makes it probe again.
  void NoteResult(size_t i, const absl::Status& status);

  // OnServerVote for server i.
  void ReportVote(absl::string_view resource, absl::string_view operation,
                  size_t i, const absl::Status& status, absl::Duration latency);

  void Register(std::shared_ptr<Op> op);
  void Unregister(Op* op) { active_.erase(op); }
  // The RedLock is being destroyed: every pending operation ends, and the
  // observer is never called again.
  void Shutdown();

  RedLock::ServerStatus Status(size_t i) const;

 private:
  void OnProbeReply(size_t i, uint64_t id, uint64_t epoch,
                    const absl::StatusOr<Reply>& reply);
  void CheckDistinct(size_t i);
  std::string Name(size_t i) const;

  EventLoop* const loop_;
  const RedLockOptions options_;
  const int quorum_;
  // The caller's observer while the RedLock lives; NoopLockObserver() after
  // Shutdown, because background releases can outlive the RedLock (and the
  // observer, which the caller only keeps as long as the RedLock).
  LockObserver* observer_;
  std::vector<Server> servers_;
  std::mt19937_64 rng_;
  absl::flat_hash_map<Op*, std::shared_ptr<Op>> active_;
  absl::Status misconfigured_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_CORE_H_
