// Internal to //redlock (namespace redlock_internal): `RunIdTracker`, who
// each server is -- its Redis `run_id`, learnt by `INFO server` probes sent
// ahead of lock commands on the same connection (see RESTART SAFETY in
// redlock.h). From it come the restart rule (a restarted or young server's
// votes do not count for a while: `Counted`, `NoteYoung`, `Status`) and the
// duplicate check (one Redis instance listed twice: `misconfigured`). The
// operations ask it before a lock command (`BeforeLockCommand`) and tell it
// every reply (`NoteResult`). Not part of the API.
//
// Lifetime: held by the Core (shared_ptr); a probe's reply that arrives
// after it is gone is dropped. Not thread-safe: call only on the loop's
// thread.
#ifndef DLOCK_REDLOCK_RUN_ID_TRACKER_H_
#define DLOCK_REDLOCK_RUN_ID_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/redlock/redlock.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace redlock_internal {

// A failure of the server or of the way to it (as opposed to an answer
// about the key): after one, the server's run_id is checked again.
bool IsServerFailure(const absl::Status& s);

// What restart detection did for one lock command: the INFO probe queued
// ahead of it (id 0: none) and the connection it went out on.
struct Probe {
  uint64_t id = 0;
  uint64_t epoch = 0;
};

class RunIdTracker : public std::enable_shared_from_this<RunIdTracker> {
 public:
  // One entry per transport; `options` (delayed_restart, restart_window,
  // max_ttl, check_run_id_every_command, server_names) must outlive it.
  RunIdTracker(EventLoop* loop, const RedLockOptions& options,
               const std::vector<Transport*>& transports);

  // The delayed-restart window (0 when the rule is off).
  absl::Duration RestartWindow() const;

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

  RedLock::ServerStatus Status(size_t i) const;

 private:
  struct Server {
    Transport* transport = nullptr;
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

  static bool Confirmed(const Server& s, const Probe& probe);
  void OnProbeReply(size_t i, uint64_t id, uint64_t epoch, const absl::StatusOr<Reply>& reply);
  void CheckDistinct(size_t i);
  std::string Name(size_t i) const;

  EventLoop* const loop_;
  const RedLockOptions& options_;
  std::vector<Server> servers_;
  absl::Status misconfigured_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_RUN_ID_TRACKER_H_
