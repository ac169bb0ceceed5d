#include "dlock/lock/replica_ack.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

constexpr absl::string_view kShortfallPrefix = "replica acknowledgement: ";

absl::Status Shortfall(absl::string_view why) {
  return absl::UnavailableError(absl::StrCat(kShortfallPrefix, why));
}

// One script + WAIT pair. Held by both callbacks; the first to find the
// outcome complete calls back.
struct AckedRun {
  Transport* transport;
  ReplicaAckOptions ack;
  absl::Duration timeout;
  WroteFn wrote;
  ReplyCallback callback;
  std::optional<absl::StatusOr<Reply>> script;
  uint64_t script_epoch = 0;
  std::optional<absl::StatusOr<Reply>> wait;
  uint64_t wait_epoch = 0;
  bool done = false;

  std::vector<std::string> WaitArgv() const {
    return {"WAIT", absl::StrCat(ack.min_replicas),
            absl::StrCat(absl::ToInt64Milliseconds(ack.timeout))};
  }

  void Finish(absl::StatusOr<Reply> result) {
    done = true;
    std::move(callback)(std::move(result));
  }

  // Both replies are in, WAIT's after the script's.
  void Judge() {
    const absl::StatusOr<Reply>& w = *wait;
    if (!w.ok()) {
      Finish(Shortfall(absl::StrCat("unknown (WAIT failed: ", w.status().ToString(),
                                    ")")));
    } else if (script_epoch != wait_epoch) {
      Finish(Shortfall("unknown (the connection changed between the write and WAIT)"));
    } else if (!w->is_integer()) {
      Finish(Shortfall(absl::StrCat("unexpected WAIT reply: ", w->DebugString())));
    } else if (w->integer < ack.min_replicas) {
      Finish(Shortfall(absl::StrCat("only ", w->integer, " of ", ack.min_replicas,
                                    " replicas acknowledged within ",
                                    absl::FormatDuration(ack.timeout))));
    } else {
      Finish(*std::move(script));
    }
  }
};

void SendWait(const std::shared_ptr<AckedRun>& run) {
  absl::Status s = run->transport->Send(
      run->WaitArgv(), run->timeout + run->ack.timeout,
      [run](absl::StatusOr<Reply> reply) {
        if (run->done) return;
        run->wait_epoch = run->transport->connection_epoch();
        const bool script_in = run->script.has_value();
        run->wait = std::move(reply);
        // A WAIT answered before the script's reply went out before the
        // script's write (a late-safe script sent again after a SCRIPT
        // FLUSH): it proves nothing, the script's reply handler sends
        // another.
        if (script_in) run->Judge();
      });
  if (!s.ok()) run->wait = s;  // judged when the script's reply arrives
}

}  // namespace

absl::Status ValidateReplicaAck(const ReplicaAckOptions& ack) {
  if (ack.min_replicas < 0) {
    return absl::InvalidArgumentError("min_replicas must be >= 0");
  }
  if (ack.min_replicas > 0 && ack.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        "the replica acknowledgement timeout must be at least 1 ms");
  }
  return absl::OkStatus();
}

bool IsReplicaShortfall(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         absl::StartsWith(status.message(), kShortfallPrefix);
}

absl::Status RunAcknowledged(const Script& script, Transport& transport,
                             std::vector<std::string> keys,
                             std::vector<std::string> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteFn wrote,
                             ReplyCallback callback) {
  if (ack.min_replicas <= 0) {
    return script.Run(transport, std::move(keys), std::move(args), timeout,
                      std::move(callback));
  }
  if (transport.cluster()) {
    // WAIT has no key: a cluster would route it to some master, not the one
    // that ran the script, and count that master's replicas.
    return absl::InvalidArgumentError(
        "replica acknowledgement (min_replicas) is not supported on a Redis Cluster");
  }
  auto run = std::make_shared<AckedRun>();
  run->transport = &transport;
  run->ack = ack;
  run->timeout = timeout;
  run->wrote = std::move(wrote);
  run->callback = std::move(callback);
  absl::Status s = script.Run(
      transport, std::move(keys), std::move(args), timeout,
      [run](absl::StatusOr<Reply> reply) {
        run->script_epoch = run->transport->connection_epoch();
        if (!reply.ok() || !run->wrote(*reply)) {
          run->Finish(std::move(reply));  // nothing to acknowledge
          return;
        }
        const bool stale_wait = run->wait.has_value() && run->wait->ok();
        const bool wait_rejected = run->wait.has_value() && !run->wait->ok();
        run->script = std::move(reply);
        if (wait_rejected) {
          run->Judge();
        } else if (stale_wait) {
          run->wait.reset();
          SendWait(run);
          if (run->wait.has_value()) run->Judge();  // the second WAIT was rejected
        }
        // else: the WAIT behind the script is still on its way.
      });
  if (!s.ok()) return s;
  SendWait(run);
  return absl::OkStatus();
}

}  // namespace dlock
