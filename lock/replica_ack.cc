#include "dlock/lock/replica_ack.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

absl::Status Shortfall(absl::string_view why) {
  return absl::UnavailableError(absl::StrCat("replica acknowledgement: ", why));
}

// The transport a script runs on when its writes must be acknowledged: it
// forwards everything to `base_` and sends `WAIT min_replicas timeout` right
// behind each script (the two are pipelined on one connection, so WAIT
// counts the replicas that have the script's write), holding the script's
// reply until WAIT has answered. One per script call (Script sends at most
// twice: once more after a SCRIPT FLUSH, from inside the first reply's
// callback); kept alive by its callbacks.
class AckedTransport final : public Transport,
                             public std::enable_shared_from_this<AckedTransport> {
 public:
  AckedTransport(Transport* base, const ReplicaAckOptions& ack, WroteRule wrote)
      : base_(base), ack_(ack), wrote_(wrote) {}

  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override {
    const uint64_t round = ++round_;  // a new script send: earlier replies are stale
    script_.reset();
    wait_.reset();
    auto self = shared_from_this();
    absl::Status s = base_->SendScript(body, evalsha_argv, timeout,
                                       [self, round](absl::StatusOr<Reply> reply) {
                                         self->OnScript(round, std::move(reply));
                                       });
    if (!s.ok()) return s;
    callback_ = std::move(callback);
    std::vector<std::string> wait = {"WAIT", absl::StrCat(ack_.min_replicas),
                                     absl::StrCat(absl::ToInt64Milliseconds(ack_.timeout))};
    absl::Status w = base_->Send(std::move(wait), timeout + ack_.timeout,
                                 [self, round](absl::StatusOr<Reply> reply) {
                                   self->OnWait(round, std::move(reply));
                                 });
    if (!w.ok()) wait_ = std::move(w);  // judged when the script's reply arrives
    return absl::OkStatus();
  }

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override {
    return base_->Send(std::move(argv), timeout, std::move(callback));
  }
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override {
    return base_->Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
  }
  uint64_t connection_epoch() const override { return base_->connection_epoch(); }
  bool cluster() const override { return base_->cluster(); }

 private:
  void OnScript(uint64_t round, absl::StatusOr<Reply> reply) {
    if (round != round_) return;  // cannot happen: one script send at a time
    script_epoch_ = base_->connection_epoch();
    if (!reply.ok() || !wrote_.Wrote(*reply)) {
      Finish(std::move(reply));  // nothing to acknowledge
      return;
    }
    script_ = std::move(reply);
    if (wait_.has_value()) Judge();
    // else: the WAIT behind the script is still on its way.
  }

  void OnWait(uint64_t round, absl::StatusOr<Reply> reply) {
    // A WAIT of an earlier send (the script was sent again after a SCRIPT
    // FLUSH, with a WAIT of its own behind it) or of a finished call proves
    // nothing.
    if (round != round_ || !callback_) return;
    wait_epoch_ = base_->connection_epoch();
    wait_ = std::move(reply);
    if (script_.has_value()) Judge();
  }

  void Finish(absl::StatusOr<Reply> result) {
    // The callback may send the script again (SendScript above): take it
    // out first.
    ReplyCallback callback = std::move(callback_);
    callback_ = nullptr;
    std::move(callback)(std::move(result));
  }

  // Both replies are in, WAIT's after the script's.
  void Judge() {
    const absl::StatusOr<Reply>& w = *wait_;
    if (!w.ok()) {
      Finish(Shortfall(absl::StrCat("unknown (WAIT failed: ", w.status().ToString(), ")")));
    } else if (script_epoch_ != wait_epoch_) {
      Finish(Shortfall("unknown (the connection changed between the write and WAIT)"));
    } else if (!w->is_integer()) {
      Finish(Shortfall(absl::StrCat("unexpected WAIT reply: ", w->DebugString())));
    } else if (w->integer < ack_.min_replicas) {
      Finish(Shortfall(absl::StrCat("only ", w->integer, " of ", ack_.min_replicas,
                                    " replicas acknowledged within ",
                                    absl::FormatDuration(ack_.timeout))));
    } else {
      Finish(*std::move(script_));
    }
  }

  Transport* const base_;
  const ReplicaAckOptions ack_;
  const WroteRule wrote_;
  uint64_t round_ = 0;
  ReplyCallback callback_;
  std::optional<absl::StatusOr<Reply>> script_;
  uint64_t script_epoch_ = 0;
  std::optional<absl::StatusOr<Reply>> wait_;
  uint64_t wait_epoch_ = 0;
};

// ReplicaAckRunner (replica_ack_options.h).
absl::Status RunOnAckedTransport(Transport& transport, const ReplicaAckOptions& ack,
                                 WroteRule wrote,
                                 absl::FunctionRef<absl::Status(Transport&)> send) {
  if (ack.min_replicas <= 0) return send(transport);
  if (transport.cluster()) {
    // WAIT has no key: a cluster would route it to some master, not the one
    // that ran the script, and count that master's replicas.
    return absl::InvalidArgumentError(
        "replica acknowledgement (min_replicas) is not supported on a Redis Cluster");
  }
  // Held by its callbacks once the script is sent; by this frame until then.
  auto acked = std::make_shared<AckedTransport>(&transport, ack, wrote);
  return send(*acked);
}

}  // namespace

ReplicaAckOptions ReplicaAck(int min_replicas, absl::Duration timeout) {
  ReplicaAckOptions ack;
  ack.min_replicas = min_replicas;
  ack.timeout = timeout;
  ack.runner = &RunOnAckedTransport;
  return ack;
}

absl::Status RunAcknowledged(const Script& script, Transport& transport,
                             std::vector<std::string> keys,
                             std::vector<std::string> args, absl::Duration timeout,
                             const ReplicaAckOptions& ack, WroteRule wrote,
                             ReplyCallback callback) {
  return RunOnAckedTransport(transport, ack, wrote, [&](Transport& t) {
    return script.Run(t, std::move(keys), std::move(args), timeout, std::move(callback));
  });
}

}  // namespace dlock
