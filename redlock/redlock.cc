#include "dlock/redlock/redlock.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace redlock_internal {
namespace {

constexpr absl::Duration kDriftConstant = absl::Milliseconds(2);
constexpr absl::Duration kMinAutoServerTimeout = absl::Milliseconds(1);
constexpr absl::Duration kMaxAutoServerTimeout = absl::Milliseconds(50);
constexpr absl::Duration kMinAutoReleaseTimeout = absl::Seconds(1);
constexpr char kPolicy[] = "redlock";

// Raises the fencing counter KEYS[1] to ARGV[1] if it is lower; never lowers
// it. Replies with the counter's value afterwards. A counter that is not an
// integer is an error (foreign data), like INCR's.
const Script& RaiseFenceScript() {
  static const Script* const s = new Script(R"lua(
local f = tonumber(ARGV[1])
local c = redis.call('get', KEYS[1])
if c == false then c = 0 else c = tonumber(c) end
if c == nil then
  return redis.error_reply('ERR value is not an integer or out of range')
end
if c < f then
  redis.call('set', KEYS[1], ARGV[1])
  return f
end
return c
)lua");
  return *s;
}

// A failure of the server or of the way to it (as opposed to an answer
// about the key): after one, the server's run_id is checked again.
bool IsServerFailure(const absl::Status& s) {
  return !s.ok() && !absl::IsAborted(s) && !absl::IsFailedPrecondition(s) &&
         !IsYoungDataSet(s);
}

// The value of the `run_id:` line of an INFO reply, or "".
std::string ParseRunId(absl::string_view info) {
  constexpr absl::string_view kField = "run_id:";
  size_t pos = 0;
  while (pos < info.size()) {
    size_t end = info.find('\n', pos);
    if (end == absl::string_view::npos) end = info.size();
    absl::string_view line = info.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, kField.size()) == kField) {
      return std::string(line.substr(kField.size()));
    }
    pos = end + 1;
  }
  return "";
}

}  // namespace

struct Server {
  std::unique_ptr<LockCommands> commands;
  Transport* transport = nullptr;
  std::string name;
  // Restart detection (see RESTART SAFETY in the header).
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
class Op : public Cancellable {
 public:
  // The RedLock is being destroyed: end now, post kCancelled to the user.
  virtual void Shutdown() = 0;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(EventLoop* loop, RedLockOptions options, int quorum,
       const std::vector<Transport*>& transports)
      : loop_(loop),
        options_(std::move(options)),
        quorum_(quorum),
        observer_(ObserverOrNoop(options_.observer)),
        rng_(options_.jitter_seed != 0 ? options_.jitter_seed
                                       : absl::Uniform<uint64_t>(absl::BitGen())) {
    servers_.resize(transports.size());
    for (size_t i = 0; i < transports.size(); ++i) {
      servers_[i].transport = transports[i];
      servers_[i].commands =
          std::make_unique<LockCommands>(transports[i], options_.keys);
      if (!options_.server_names.empty()) servers_[i].name = options_.server_names[i];
    }
  }

  EventLoop* loop() const { return loop_; }
  const RedLockOptions& options() const { return options_; }
  int quorum() const { return quorum_; }
  size_t n() const { return servers_.size(); }
  LockObserver* observer() const { return observer_; }
  Server& server(size_t i) { return servers_[i]; }
  const Server& server(size_t i) const { return servers_[i]; }
  bool shut_down() const { return shut_down_; }

  absl::Duration Drift(absl::Duration ttl) const {
    return DriftAllowance(ttl, options_.drift_factor, kDriftConstant);
  }

  absl::Duration Timeout(absl::Duration ttl) const {
    if (options_.server_timeout > absl::ZeroDuration()) return options_.server_timeout;
    if (ttl <= absl::ZeroDuration()) return kMaxAutoServerTimeout;
    return std::max(kMinAutoServerTimeout, std::min(ttl / 10, kMaxAutoServerTimeout));
  }

  absl::Duration ReleaseTimeout(absl::Duration ttl) const {
    if (options_.release_timeout > absl::ZeroDuration()) return options_.release_timeout;
    return std::max(Timeout(ttl), kMinAutoReleaseTimeout);
  }

  // The delayed-restart window (0 when the rule is off).
  absl::Duration RestartWindow() const {
    if (!options_.delayed_restart) return absl::ZeroDuration();
    return options_.restart_window > absl::ZeroDuration() ? options_.restart_window
                                                          : options_.max_ttl;
  }

  // kInvalidArgument once two servers turned out to be one Redis instance
  // (same run_id), else OK.
  const absl::Status& misconfigured() const { return misconfigured_; }


  void NoteYoung(size_t i, const absl::Status& status) {
    servers_[i].young_until = std::max(servers_[i].young_until,
                                       loop_->Now() + YoungDataSetTimeLeft(status));
  }

  // Whether a vote of server i, arriving at `now`, counts, for a command
  // sent with `probe`. With the delayed-restart rule, a grant counts only
  // from a server whose run_id is confirmed for that command -- by the INFO
  // queued ahead of it, or because it went out and came back on a
  // connection already confirmed -- and not quarantined by a restart.
  bool Counted(size_t i, absl::Time now, const Probe& probe) const {
    if (!options_.delayed_restart) return true;
    const Server& s = servers_[i];
    if (s.probe_supported && !Confirmed(s, probe)) return false;
    return now >= s.restart_seen + RestartWindow();
  }

  static bool Confirmed(const Server& s, const Probe& probe) {
    if (probe.id != 0) return s.last_ok_probe >= probe.id;
    return probe.epoch != 0 && probe.epoch == s.verified_epoch &&
           s.transport->connection_epoch() == probe.epoch;
  }

  absl::Duration RetryDelay() {
    int64_t delay = absl::ToInt64Nanoseconds(options_.retry_delay);
    int64_t jitter = absl::ToInt64Nanoseconds(options_.retry_jitter);
    if (jitter > 0) {
      delay += std::uniform_int_distribution<int64_t>(-jitter, jitter)(rng_);
    }
    return absl::Nanoseconds(std::max<int64_t>(delay, 0));
  }

  // Called before an acquire or extend is sent to server i: queues an
  // `INFO server` ahead of it (same connection, so its answer describes the
  // server that runs the command) when the run_id must be (re)checked:
  // on first use, after a failure, on every new connection, and -- with
  // the delayed-restart rule -- whenever the transport cannot name its
  // connection or `check_run_id_every_command` is set.
  //
  // An acquire (`gates_votes` false) needs the run_id only to tell one
  // instance listed twice: it probes on first use, after a failure and on a
  // new connection, never per command.
  Probe BeforeLockCommand(size_t i, absl::Duration timeout, bool gates_votes) {
    Server& s = servers_[i];
    Probe probe;
    probe.epoch = s.transport->connection_epoch();
    if (!s.probe_supported) return probe;
    const bool same_connection = probe.epoch != 0 && probe.epoch == s.verified_epoch;
    if (!s.probe_needed) {
      if (!gates_votes) {
        if (probe.epoch == 0 || same_connection) return probe;
      } else if (options_.delayed_restart) {
        if (same_connection && !options_.check_run_id_every_command) return probe;
      } else if (probe.epoch == 0 || same_connection) {
        return probe;
      }
    }
    const uint64_t id = s.next_probe++;
    const uint64_t epoch = probe.epoch;
    std::weak_ptr<Core> weak = weak_from_this();
    absl::Status sent = s.transport->Send(
        {"INFO", "server"}, timeout, [weak, i, id, epoch](absl::StatusOr<Reply> reply) {
          std::shared_ptr<Core> core = weak.lock();
          if (core != nullptr) core->OnProbeReply(i, id, epoch, reply);
        });
    if (!sent.ok()) {
      s.probe_needed = true;
      return probe;
    }
    probe.id = id;
    return probe;
  }

  void NoteResult(size_t i, const absl::Status& status) {
    if (IsServerFailure(status)) servers_[i].probe_needed = true;
  }

  void ReportVote(absl::string_view resource, absl::string_view operation,
                  size_t i, const absl::Status& status, absl::Duration latency) {
    ServerVoteEvent event;
    event.resource = resource;
    event.operation = operation;
    event.server = static_cast<int>(i);
    event.server_name = servers_[i].name;
    event.status = status;
    event.latency = latency;
    observer_->OnServerVote(event);
  }

  void Register(std::shared_ptr<Op> op) {
    Op* key = op.get();
    active_.emplace(key, std::move(op));
  }
  void Unregister(Op* op) { active_.erase(op); }

  void Shutdown() {
    shut_down_ = true;
    observer_ = NoopLockObserver();
    absl::flat_hash_map<Op*, std::shared_ptr<Op>> ops;
    ops.swap(active_);
    for (auto& entry : ops) entry.second->Shutdown();
  }

  RedLock::ServerStatus Status(size_t i) const {
    const Server& s = servers_[i];
    RedLock::ServerStatus status;
    status.run_id = s.run_id;
    status.restarts_observed = s.restarts;
    if (options_.delayed_restart) {
      absl::Time again = s.young_until;
      if (s.restart_seen != absl::InfinitePast()) {
        again = std::max(again, s.restart_seen + RestartWindow());
      }
      if (loop_->Now() < again) {
        status.quarantined = true;
        status.counted_again_at = again;
      }
    }
    return status;
  }

 private:
  void OnProbeReply(size_t i, uint64_t id, uint64_t epoch,
                    const absl::StatusOr<Reply>& reply) {
    Server& s = servers_[i];
    if (!reply.ok()) {
      s.probe_needed = true;
      return;
    }
    if (reply->is_error()) {
      // INFO renamed away or denied by an ACL: restart detection is
      // unavailable for this server (documented limitation), not an outage.
      if (reply->IsErrorWithPrefix("ERR unknown command") ||
          reply->IsErrorWithPrefix("NOPERM")) {
        s.probe_supported = false;
      }
      s.probe_needed = true;
      return;
    }
    if (!reply->is_string() && !reply->is_status()) return;
    std::string run_id = ParseRunId(reply->str);
    if (run_id.empty()) {
      s.probe_supported = false;
      return;
    }
    if (!s.run_id.empty() && run_id != s.run_id) {
      ++s.restarts;
      s.restart_seen = loop_->Now();
    }
    s.run_id = std::move(run_id);
    s.probe_needed = false;
    CheckDistinct(i);
    s.last_ok_probe = std::max(s.last_ok_probe, id);
    // Sent and answered on one connection: its server is confirmed.
    if (epoch != 0 && s.transport->connection_epoch() == epoch) s.verified_epoch = epoch;
  }

  // Two listings of one Redis instance (same run_id: same host and port
  // under two names, or two DB numbers of one server) would let one server
  // vote twice. Once seen, every operation fails with kInvalidArgument.
  void CheckDistinct(size_t i) {
    if (!misconfigured_.ok()) return;
    for (size_t j = 0; j < servers_.size(); ++j) {
      if (j == i || servers_[j].run_id != servers_[i].run_id) continue;
      const size_t a = std::min(i, j), b = std::max(i, j);
      misconfigured_ = absl::InvalidArgumentError(absl::StrCat(
          "RedLock: ", Name(a), " and ", Name(b),
          " are the same Redis instance (run_id ", servers_[i].run_id,
          "); RedLock needs independent servers, or one server's votes count "
          "twice"));
      return;
    }
  }

  std::string Name(size_t i) const {
    if (!servers_[i].name.empty()) return absl::StrCat("server ", i, " (", servers_[i].name, ")");
    return absl::StrCat("server ", i);
  }

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
  bool shut_down_ = false;
  absl::Status misconfigured_;
};

namespace {

// ---------------------------------------------------------------- Acquire

class AcquireOp final : public Op, public std::enable_shared_from_this<AcquireOp> {
 public:
  AcquireOp(std::shared_ptr<Core> core, absl::string_view resource,
            const AcquireOptions& options, LeaseCallback callback)
      : core_(std::move(core)),
        resource_(resource),
        ttl_(WholeMillis(options.ttl)),
        wait_(options.wait),
        callback_(std::move(callback)),
        call_time_(core_->loop()->Now()),
        leftovers_(core_->n()) {}

  // Sends the first attempt. Never calls back from here.
  void Start() { StartAttempt(/*may_decide_now=*/false); }

  bool Cancel() override {
    if (phase_ == Phase::kDone) return false;
    std::shared_ptr<AcquireOp> self = shared_from_this();
    LeaseCallback callback = std::move(callback_);
    callback_ = nullptr;
    callback = nullptr;  // destroyed before Cancel returns
    Abandon();
    Report(absl::CancelledError("acquire cancelled"), 0);
    return true;
  }

  void Shutdown() override {
    if (phase_ == Phase::kDone) return;
    std::shared_ptr<AcquireOp> self = shared_from_this();
    LeaseCallback callback = std::move(callback_);
    callback_ = nullptr;
    Abandon();
    absl::Status status = absl::CancelledError("RedLock destroyed");
    Report(status, 0);
    core_->loop()->RunAfter(absl::ZeroDuration(),
                            [callback = std::move(callback), status]() mutable {
                              std::move(callback)(status);
                            });
  }

 private:
  // kTimedOut: no answer within the per-server deadline (the round's
  // timer, or the transport's kDeadlineExceeded); a kind of kFailed.
  enum class Vote { kPending, kGranted, kHeld, kFailed, kTimedOut, kUncounted };
  enum class Phase { kVoting, kSyncing, kWaiting, kReleasing, kDone };

  absl::Time ValidityEnd() const { return t0_ + ttl_ - core_->Drift(ttl_); }

  void StartAttempt(bool may_decide_now) {
    phase_ = Phase::kVoting;
    ++attempt_;
    token_ = NewToken();
    t0_ = core_->loop()->Now();
    const size_t n = core_->n();
    votes_.assign(n, Vote::kPending);
    fences_.assign(n, 0);
    last_server_error_ = absl::OkStatus();
    const absl::Duration timeout = core_->Timeout(ttl_);
    // However late a request of this attempt is applied, its key is gone
    // by then (best effort: a request delayed longer in the network could
    // outlive it; such a key still expires by itself).
    key_bound_[token_] = t0_ + 2 * timeout + ttl_;
    bool rejected = false;
    for (size_t i = 0; i < n; ++i) {
      // Leftovers of earlier attempts first: same connection, so the
      // server deletes them before it sees this attempt's acquire.
      absl::flat_hash_set<std::string> leftovers;
      leftovers.swap(leftovers_[i]);
      for (const std::string& token : leftovers) {
        if (MayStillExist(token)) SendRelease(i, token);
      }
      const Probe probe = core_->BeforeLockCommand(i, timeout, /*gates_votes=*/false);
      std::shared_ptr<AcquireOp> self = shared_from_this();
      absl::Status sent = core_->server(i).commands->TryAcquire(
          resource_, token_, ttl_, core_->RestartWindow(), timeout,
          [self, attempt = attempt_, i, probe, token = token_,
           sent_at = t0_](absl::StatusOr<int64_t> fence) {
            self->OnAcquireReply(attempt, i, probe, token, sent_at, std::move(fence));
          });
      if (!sent.ok()) {
        votes_[i] = Vote::kFailed;
        last_server_error_ = sent;
        core_->NoteResult(i, sent);
        rejected = true;
      }
    }
    const absl::Duration round = std::min(timeout, ValidityEnd() - t0_);
    std::weak_ptr<AcquireOp> weak = weak_from_this();
    timer_ = core_->loop()->RunAfter(round, [weak, attempt = attempt_] {
      std::shared_ptr<AcquireOp> self = weak.lock();
      if (self == nullptr || self->attempt_ != attempt) return;
      if (self->phase_ != Phase::kVoting) return;
      self->timer_ = 0;
      self->Evaluate(/*round_over=*/true);
    });
    if (rejected) {
      if (may_decide_now) {
        Evaluate(false);
      } else {
        // Not inside Acquire(): decide on a later loop turn.
        std::weak_ptr<AcquireOp> w = weak_from_this();
        core_->loop()->RunAfter(absl::ZeroDuration(), [w, attempt = attempt_] {
          std::shared_ptr<AcquireOp> self = w.lock();
          if (self != nullptr && self->attempt_ == attempt &&
              self->phase_ == Phase::kVoting) {
            self->Evaluate(false);
          }
        });
      }
    }
  }

  void OnAcquireReply(int attempt, size_t i, const Probe& probe, const std::string& token,
                      absl::Time sent_at, absl::StatusOr<int64_t> fence) {
    const absl::Time now = core_->loop()->Now();
    core_->ReportVote(resource_, "acquire", i, fence.status(), now - sent_at);
    core_->NoteResult(i, fence.status());
    const bool current = attempt == attempt_ && phase_ == Phase::kVoting;
    if (!current && attempt == attempt_ && phase_ == Phase::kReleasing &&
        absl::IsDeadlineExceeded(fence.status())) {
      // A straggler of the failed last attempt timed out: do not wait for
      // its release either.
      ReleaseSettled(i);
      return;
    }
    if (!current) {
      // A straggler. A grant for an attempt that was given up is released
      // again (the release sent at the decision normally already ran after
      // it, but not if the acquire went through a NOSCRIPT fallback).
      // A grant for the attempt that succeeded or is syncing is part of
      // that lease and stays.
      const bool kept = attempt == succeeded_attempt_ ||
                        (attempt == attempt_ && phase_ == Phase::kSyncing);
      if (fence.ok() && !kept) SendRelease(i, token);
      // A late grant of the lease with a lagging counter: raise it too, so
      // the counters converge (fire and forget; not needed for the
      // guarantee, which rests on the quorum confirmed before success).
      if (fence.ok() && kept && *fence < fence_) SendRaiseFence(i, nullptr);
      return;
    }
    (void)probe;
    if (fence.ok()) {
      // The delayed-restart rule for acquire is the server's: a young data
      // set refuses inside the script, whoever asks. The run_id is not
      // needed here.
      votes_[i] = Vote::kGranted;
      fences_[i] = *fence;
    } else if (IsYoungDataSet(fence.status())) {
      votes_[i] = Vote::kUncounted;
      core_->NoteYoung(i, fence.status());
      last_server_error_ = fence.status();
    } else if (absl::IsAborted(fence.status())) {
      votes_[i] = Vote::kHeld;
    } else {
      votes_[i] = absl::IsDeadlineExceeded(fence.status()) ? Vote::kTimedOut
                                                          : Vote::kFailed;
      last_server_error_ = fence.status();
    }
    Evaluate(false);
  }

  // Decides the voting round if its outcome is known. `round_over`: the
  // round's timer fired; servers still silent count as timed out.
  void Evaluate(bool round_over) {
    if (phase_ != Phase::kVoting) return;
    if (!core_->misconfigured().ok()) {
      final_ = true;
      FailAttempt(core_->misconfigured());
      return;
    }
    const absl::Time now = core_->loop()->Now();
    const int quorum = core_->quorum();
    int granted = 0, pending = 0, held = 0, failed = 0, timed_out = 0,
        uncounted = 0;
    for (Vote v : votes_) {
      switch (v) {
        case Vote::kPending: ++pending; break;
        case Vote::kGranted: ++granted; break;
        case Vote::kHeld: ++held; break;
        case Vote::kFailed: ++failed; break;
        case Vote::kTimedOut: ++failed; ++timed_out; break;
        case Vote::kUncounted: ++uncounted; break;
      }
    }
    if (granted >= quorum) {
      if (now >= ValidityEnd()) {
        FailAttempt(absl::DeadlineExceededError(absl::StrCat(
            "quorum reached after ", absl::FormatDuration(now - t0_),
            ": no validity left of ttl ", absl::FormatDuration(ttl_))));
        return;
      }
      CancelTimer();
      StartFenceSync();
      return;
    }
    if (round_over) {
      for (Vote& v : votes_) {
        if (v == Vote::kPending) v = Vote::kTimedOut;
      }
      failed += pending;
      timed_out += pending;
      pending = 0;
    }
    if (granted + pending >= quorum) return;  // still possible: keep waiting
    const std::string counts = absl::StrFormat(
        "%d of %d servers granted (need %d): %d held by another owner, "
        "%d failed (%d timed out), %d young (data set began less than the "
        "restart window ago)",
        granted, static_cast<int>(votes_.size()), quorum, held, failed,
        timed_out, uncounted);
    absl::Status status;
    if (round_over && now >= ValidityEnd()) {
      status = absl::DeadlineExceededError(
          absl::StrCat("validity ran out during acquire: ", counts));
    } else if (held > 0) {
      status = absl::AbortedError(absl::StrCat("lock is held by another owner: ", counts));
    } else {
      status = absl::UnavailableError(absl::StrCat(
          "not enough servers: ", counts,
          last_server_error_.ok() ? "" : "; last error: ",
          last_server_error_.ok() ? "" : last_server_error_.ToString()));
    }
    FailAttempt(std::move(status));
  }

  // Makes a quorum of the granting servers hold a fencing counter >= the
  // lease's fence (see FENCING in the header).
  void StartFenceSync() {
    phase_ = Phase::kSyncing;
    fence_ = 0;
    for (size_t i = 0; i < votes_.size(); ++i) {
      if (votes_[i] == Vote::kGranted) fence_ = std::max(fence_, fences_[i]);
    }
    sync_confirmed_ = 0;
    sync_pending_ = 0;
    for (size_t i = 0; i < votes_.size(); ++i) {
      if (votes_[i] == Vote::kGranted && fences_[i] == fence_) ++sync_confirmed_;
    }
    if (sync_confirmed_ >= core_->quorum()) {
      Succeed();
      return;
    }
    const absl::Duration timeout = core_->Timeout(ttl_);
    const absl::Time sent_at = core_->loop()->Now();
    for (size_t i = 0; i < votes_.size(); ++i) {
      if (votes_[i] != Vote::kGranted || fences_[i] >= fence_) continue;
      if (SendRaiseFence(i, &sent_at)) ++sync_pending_;
    }
    if (sync_confirmed_ + sync_pending_ < core_->quorum()) {
      FailAttempt(absl::UnavailableError(
          "could not bring the fencing counters of a quorum up to date"));
      return;
    }
    const absl::Time now = core_->loop()->Now();
    const absl::Duration round = std::min(timeout, ValidityEnd() - now);
    std::weak_ptr<AcquireOp> weak = weak_from_this();
    timer_ = core_->loop()->RunAfter(round, [weak, attempt = attempt_] {
      std::shared_ptr<AcquireOp> self = weak.lock();
      if (self == nullptr || self->attempt_ != attempt) return;
      if (self->phase_ != Phase::kSyncing) return;
      self->timer_ = 0;
      const bool expired = self->core_->loop()->Now() >= self->ValidityEnd();
      self->FailAttempt(
          expired ? absl::DeadlineExceededError(
                        "validity ran out while syncing fencing counters")
                  : absl::UnavailableError(
                        "fencing counters of a quorum not confirmed in time"));
    });
  }

  // Sends the fence write-back (raise to fence_) to server i. With
  // `sent_at`, its reply counts for the current sync round; without, it is
  // fire and forget. Returns whether it was sent.
  bool SendRaiseFence(size_t i, const absl::Time* sent_at) {
    Server& server = core_->server(i);
    std::shared_ptr<AcquireOp> self = shared_from_this();
    const int attempt = sent_at != nullptr ? attempt_ : 0;
    const absl::Time at = sent_at != nullptr ? *sent_at : core_->loop()->Now();
    absl::Status sent = RaiseFenceScript().Run(
        *server.transport, {server.commands->keys().FenceKey(resource_)},
        {absl::StrCat(fence_)}, core_->Timeout(ttl_),
        [self, attempt, i, at](absl::StatusOr<Reply> reply) {
          self->OnSyncReply(attempt, i, at, std::move(reply));
        });
    if (!sent.ok()) core_->NoteResult(i, sent);
    return sent.ok();
  }

  void OnSyncReply(int attempt, size_t i, absl::Time sent_at,
                   absl::StatusOr<Reply> reply) {
    absl::Status status = absl::OkStatus();
    if (!reply.ok()) {
      status = reply.status();
    } else if (reply->is_error()) {
      status = absl::UnavailableError(absl::StrCat("fence write-back: ", reply->str));
    } else if (!reply->is_integer() || reply->integer < fence_) {
      status = absl::InternalError(absl::StrCat(
          "unexpected reply to fence write-back: ", reply->DebugString()));
    }
    core_->ReportVote(resource_, "fence", i, status,
                      core_->loop()->Now() - sent_at);
    core_->NoteResult(i, status);
    if (attempt != attempt_ || phase_ != Phase::kSyncing) return;
    --sync_pending_;
    if (status.ok()) ++sync_confirmed_;
    if (sync_confirmed_ >= core_->quorum()) {
      CancelTimer();
      if (core_->loop()->Now() >= ValidityEnd()) {
        FailAttempt(absl::DeadlineExceededError(
            "validity ran out while syncing fencing counters"));
      } else {
        Succeed();
      }
    } else if (sync_confirmed_ + sync_pending_ < core_->quorum()) {
      CancelTimer();
      FailAttempt(absl::UnavailableError(absl::StrCat(
          "could not bring the fencing counters of a quorum up to date: ",
          status.ToString())));
    }
  }

  void Succeed() {
    Lease lease;
    lease.resource = resource_;
    lease.token = token_;
    lease.fence = fence_;
    lease.ttl = ttl_;
    lease.deadline = ValidityEnd();
    succeeded_attempt_ = attempt_;
    Finish(std::move(lease));
  }

  // Gives the current attempt up: releases its token everywhere, then
  // retries, or -- after the last attempt -- reports `status` once every
  // server confirmed the release or the per-server timeout passed.
  void FailAttempt(absl::Status status) {
    CancelTimer();
    const absl::Time now = core_->loop()->Now();
    const absl::Duration delay = core_->RetryDelay();
    bool retry;
    if (final_) {
      retry = false;
    } else if (wait_ > absl::ZeroDuration()) {
      retry = now + delay <= call_time_ + wait_;
    } else {
      retry = retries_ < core_->options().retry_count;
    }
    if (!retry) {
      phase_ = Phase::kReleasing;
      final_status_ = std::move(status);
      releasing_ = 0;
      awaiting_release_.assign(core_->n(), false);
      for (size_t i = 0; i < core_->n(); ++i) {
        // Wait for every server that did not time out. A straggler's
        // release runs right after its acquire, so it is awaited until
        // that acquire times out (see OnAcquireReply). Servers that timed
        // out get the release too, in the background.
        const bool wait = votes_[i] != Vote::kTimedOut;
        if (SendRelease(i, token_, /*track=*/wait) && wait) {
          awaiting_release_[i] = true;
          ++releasing_;
        }
      }
      if (releasing_ == 0) {
        Finish(final_status_);
        return;
      }
      std::weak_ptr<AcquireOp> weak = weak_from_this();
      timer_ = core_->loop()->RunAfter(
          core_->Timeout(ttl_), [weak, attempt = attempt_] {
            std::shared_ptr<AcquireOp> self = weak.lock();
            if (self == nullptr || self->attempt_ != attempt) return;
            if (self->phase_ != Phase::kReleasing) return;
            self->timer_ = 0;
            self->Finish(self->final_status_);
          });
      return;
    }
    ReleaseEverywhere();
    phase_ = Phase::kWaiting;
    ++retries_;
    AcquireWaitEvent event;
    event.policy = kPolicy;
    event.resource = resource_;
    event.attempt = attempt_;
    event.last_error = status;
    event.next_attempt_in = delay;
    event.wait_left = wait_ > absl::ZeroDuration()
                          ? call_time_ + wait_ - now
                          : absl::ZeroDuration();
    std::weak_ptr<AcquireOp> weak = weak_from_this();
    timer_ = core_->loop()->RunAfter(delay, [weak, attempt = attempt_, delay] {
      std::shared_ptr<AcquireOp> self = weak.lock();
      if (self == nullptr || self->attempt_ != attempt) return;
      if (self->phase_ != Phase::kWaiting) return;
      self->timer_ = 0;
      self->waited_ += delay;
      self->StartAttempt(/*may_decide_now=*/true);
    });
    core_->observer()->OnAcquireWait(event);
  }

  // The final release on server i needs no more waiting for.
  void ReleaseSettled(size_t i) {
    if (phase_ != Phase::kReleasing || !awaiting_release_[i]) return;
    awaiting_release_[i] = false;
    if (--releasing_ == 0) Finish(final_status_);
  }

  void ReleaseEverywhere() {
    for (size_t i = 0; i < core_->n(); ++i) SendRelease(i, token_);
  }

  // Releases `token` on server i; if that cannot be confirmed, remembers it
  // as a leftover to release again before the next attempt. `track`: the
  // final failure waits for this release (see FailAttempt). Returns whether
  // the release was sent.
  bool SendRelease(size_t i, const std::string& token, bool track = false) {
    std::shared_ptr<AcquireOp> self = shared_from_this();
    const absl::Time sent_at = core_->loop()->Now();
    absl::Status sent = core_->server(i).commands->Release(
        resource_, token, core_->Timeout(ttl_),
        [self, i, token, sent_at, track, attempt = attempt_](absl::Status status) {
          self->core_->ReportVote(self->resource_, "release", i, status,
                                  self->core_->loop()->Now() - sent_at);
          self->core_->NoteResult(i, status);
          if (IsServerFailure(status) && self->phase_ != Phase::kDone &&
              self->MayStillExist(token)) {
            self->leftovers_[i].insert(token);
          }
          if (track && self->attempt_ == attempt) self->ReleaseSettled(i);
        });
    if (!sent.ok() && phase_ != Phase::kDone) leftovers_[i].insert(token);
    return sent.ok();
  }

  // Cancel/Shutdown: stop, and release whatever this operation may hold.
  void Abandon() {
    CancelTimer();
    const Phase phase = phase_;
    phase_ = Phase::kDone;
    core_->Unregister(this);
    if (phase == Phase::kVoting || phase == Phase::kSyncing) {
      ReleaseEverywhere();
    }
    for (size_t i = 0; i < leftovers_.size(); ++i) {
      absl::flat_hash_set<std::string> leftovers;
      leftovers.swap(leftovers_[i]);
      for (const std::string& token : leftovers) {
        if (MayStillExist(token)) SendRelease(i, token);
      }
    }
  }

  void CancelTimer() {
    if (timer_ != 0) {
      core_->loop()->Cancel(timer_);
      timer_ = 0;
    }
  }

  // Whether a key of this operation's `token` could still be on a server.
  bool MayStillExist(const std::string& token) const {
    auto it = key_bound_.find(token);
    return it != key_bound_.end() && core_->loop()->Now() < it->second;
  }

  void Report(const absl::Status& status, int64_t fence) {
    AcquireEvent event;
    event.policy = kPolicy;
    event.resource = resource_;
    event.status = status;
    event.latency = core_->loop()->Now() - call_time_;
    event.waited = waited_;
    event.attempts = attempt_;
    event.fence = fence;
    event.ttl = status.ok() ? ttl_ : absl::ZeroDuration();
    core_->observer()->OnAcquire(event);
  }

  void Finish(absl::StatusOr<Lease> result) {
    CancelTimer();
    // Decided before both listings of one instance had answered INFO (the
    // final release waited for every server): the configuration error is
    // the real cause.
    if (!result.ok() && !core_->misconfigured().ok()) result = core_->misconfigured();
    phase_ = Phase::kDone;
    std::shared_ptr<AcquireOp> self = shared_from_this();
    LeaseCallback callback = std::move(callback_);
    callback_ = nullptr;
    core_->Unregister(this);
    Report(result.status(), result.ok() ? result->fence : 0);
    // The callback may destroy the RedLock; `self` keeps this op (and the
    // core) alive, and nothing is touched afterwards.
    std::move(callback)(std::move(result));
  }

  const std::shared_ptr<Core> core_;
  const std::string resource_;
  const absl::Duration ttl_;
  const absl::Duration wait_;
  LeaseCallback callback_;
  const absl::Time call_time_;

  Phase phase_ = Phase::kVoting;
  int attempt_ = 0;
  int retries_ = 0;
  int succeeded_attempt_ = 0;
  // No more attempts (a configuration error).
  bool final_ = false;
  absl::Duration waited_ = absl::ZeroDuration();
  TimerId timer_ = 0;
  // The outcome reported once the final release settled (kReleasing).
  absl::Status final_status_;
  int releasing_ = 0;
  std::vector<bool> awaiting_release_;

  // The current attempt.
  std::string token_;
  absl::Time t0_;
  std::vector<Vote> votes_;
  std::vector<int64_t> fences_;
  absl::Status last_server_error_;
  int64_t fence_ = 0;
  int sync_confirmed_ = 0;
  int sync_pending_ = 0;

  // Per server: tokens of earlier attempts whose release was not confirmed.
  std::vector<absl::flat_hash_set<std::string>> leftovers_;
  // Per token of this operation: after this time none of its keys exists.
  absl::flat_hash_map<std::string, absl::Time> key_bound_;
};

// ---------------------------------------------------------------- Extend

class ExtendOp final : public Op, public std::enable_shared_from_this<ExtendOp> {
 public:
  ExtendOp(std::shared_ptr<Core> core, const Lease& lease, absl::Duration ttl,
           LeaseCallback callback)
      : core_(std::move(core)), lease_(lease), ttl_(WholeMillis(ttl)), callback_(std::move(callback)) {}

  void Start() {
    t1_ = core_->loop()->Now();
    const size_t n = core_->n();
    votes_.assign(n, Vote::kPending);
    if (t1_ >= lease_.deadline) {
      PostFinish(absl::FailedPreconditionError(
          "extend: the lease's local deadline has passed"));
      return;
    }
    const absl::Duration timeout = core_->Timeout(ttl_);
    bool rejected = false;
    for (size_t i = 0; i < n; ++i) {
      const Probe probe = core_->BeforeLockCommand(i, timeout, /*gates_votes=*/true);
      std::shared_ptr<ExtendOp> self = shared_from_this();
      absl::Status sent = core_->server(i).commands->ExtendOrReacquire(
          lease_.resource, lease_.token, ttl_, timeout,
          [self, i, probe](absl::Status status) {
            self->OnReply(i, probe, std::move(status));
          });
      if (!sent.ok()) {
        votes_[i] = Vote::kFailed;
        last_server_error_ = sent;
        rejected = true;
      }
    }
    std::weak_ptr<ExtendOp> weak = weak_from_this();
    timer_ = core_->loop()->RunAfter(std::min(timeout, lease_.deadline - t1_), [weak] {
      std::shared_ptr<ExtendOp> self = weak.lock();
      if (self == nullptr || self->done_) return;
      self->timer_ = 0;
      self->Evaluate(/*round_over=*/true);
    });
    if (rejected) {
      std::weak_ptr<ExtendOp> w = weak_from_this();
      core_->loop()->RunAfter(absl::ZeroDuration(), [w] {
        std::shared_ptr<ExtendOp> self = w.lock();
        if (self != nullptr && !self->done_) self->Evaluate(false);
      });
    }
  }

  bool Cancel() override {
    // Extend hands out no handle; only Shutdown ends it early.
    return false;
  }

  void Shutdown() override {
    if (done_) return;
    std::shared_ptr<ExtendOp> self = shared_from_this();
    CancelTimer();
    done_ = true;
    core_->Unregister(this);
    PostCallback(absl::CancelledError("RedLock destroyed"));
  }

 private:
  enum class Vote { kPending, kOk, kRefused, kFailed, kUncounted };

  void OnReply(size_t i, const Probe& probe, absl::Status status) {
    const absl::Time now = core_->loop()->Now();
    core_->ReportVote(lease_.resource, "extend", i, status, now - t1_);
    core_->NoteResult(i, status);
    if (done_) return;
    if (status.ok()) {
      votes_[i] = core_->Counted(i, now, probe) ? Vote::kOk : Vote::kUncounted;
    } else if (absl::IsFailedPrecondition(status)) {
      votes_[i] = Vote::kRefused;
    } else {
      votes_[i] = Vote::kFailed;
      last_server_error_ = status;
    }
    Evaluate(false);
  }

  void Evaluate(bool round_over) {
    if (done_) return;
    if (!core_->misconfigured().ok()) {
      Finish(core_->misconfigured());
      return;
    }
    const absl::Time now = core_->loop()->Now();
    const int quorum = core_->quorum();
    const int n = static_cast<int>(votes_.size());
    int ok = 0, pending = 0, refused = 0, failed = 0, uncounted = 0;
    for (Vote v : votes_) {
      switch (v) {
        case Vote::kPending: ++pending; break;
        case Vote::kOk: ++ok; break;
        case Vote::kRefused: ++refused; break;
        case Vote::kFailed: ++failed; break;
        case Vote::kUncounted: ++uncounted; break;
      }
    }
    const absl::Time new_deadline = t1_ + ttl_ - core_->Drift(ttl_);
    if (ok >= quorum) {
      if (now >= lease_.deadline || now >= new_deadline) {
        Finish(absl::DeadlineExceededError(
            "extend: quorum reached after the lease's deadline"));
        return;
      }
      Lease lease = lease_;
      lease.ttl = ttl_;
      lease.deadline = new_deadline;
      Finish(std::move(lease));
      return;
    }
    if (round_over) {
      failed += pending;
      pending = 0;
    }
    if (ok + pending >= quorum) return;
    const std::string counts = absl::StrFormat(
        "%d of %d servers extended (need %d): %d refused (another owner), "
        "%d failed, %d not counted after a restart",
        ok, n, quorum, refused, failed, uncounted);
    if (round_over && now >= lease_.deadline) {
      Finish(absl::DeadlineExceededError(
          absl::StrCat("extend: the lease's deadline passed first: ", counts)));
    } else if (refused > n - quorum) {
      Finish(absl::FailedPreconditionError(
          absl::StrCat("extend: the lease no longer owns a quorum: ", counts)));
    } else {
      Finish(absl::UnavailableError(absl::StrCat(
          "extend: not enough servers: ", counts,
          last_server_error_.ok() ? "" : "; last error: ",
          last_server_error_.ok() ? "" : last_server_error_.ToString())));
    }
  }

  void CancelTimer() {
    if (timer_ != 0) {
      core_->loop()->Cancel(timer_);
      timer_ = 0;
    }
  }

  void Report(const absl::Status& status) {
    ExtendEvent event;
    event.policy = kPolicy;
    event.resource = lease_.resource;
    event.status = status;
    event.latency = core_->loop()->Now() - t1_;
    event.ttl = ttl_;
    core_->observer()->OnExtend(event);
  }

  void Finish(absl::StatusOr<Lease> result) {
    CancelTimer();
    done_ = true;
    std::shared_ptr<ExtendOp> self = shared_from_this();
    LeaseCallback callback = std::move(callback_);
    callback_ = nullptr;
    core_->Unregister(this);
    Report(result.status());
    std::move(callback)(std::move(result));
  }

  // Finishes on a later loop turn (for outcomes known inside Extend()).
  void PostFinish(absl::Status status) {
    std::weak_ptr<ExtendOp> weak = weak_from_this();
    core_->loop()->RunAfter(absl::ZeroDuration(), [weak, status] {
      std::shared_ptr<ExtendOp> self = weak.lock();
      if (self != nullptr && !self->done_) self->Finish(status);
    });
  }

  void PostCallback(absl::Status status) {
    LeaseCallback callback = std::move(callback_);
    callback_ = nullptr;
    Report(status);
    core_->loop()->RunAfter(absl::ZeroDuration(),
                            [callback = std::move(callback), status]() mutable {
                              std::move(callback)(status);
                            });
  }

  const std::shared_ptr<Core> core_;
  const Lease lease_;
  const absl::Duration ttl_;
  LeaseCallback callback_;
  absl::Time t1_;
  std::vector<Vote> votes_;
  absl::Status last_server_error_;
  TimerId timer_ = 0;
  bool done_ = false;
};

// ---------------------------------------------------------------- Release

class ReleaseOp final : public Op, public std::enable_shared_from_this<ReleaseOp> {
 public:
  ReleaseOp(std::shared_ptr<Core> core, const Lease& lease, StatusCallback callback)
      : core_(std::move(core)),
        resource_(lease.resource),
        token_(lease.token),
        ttl_(lease.ttl),
        callback_(std::move(callback)) {}

  void Start() {
    t0_ = core_->loop()->Now();
    const size_t n = core_->n();
    votes_.assign(n, Vote::kPending);
    const absl::Duration timeout = core_->ReleaseTimeout(ttl_);
    bool rejected = false;
    for (size_t i = 0; i < n; ++i) {
      std::shared_ptr<ReleaseOp> self = shared_from_this();
      absl::Status sent = core_->server(i).commands->Release(
          resource_, token_, timeout,
          [self, i](absl::Status status) { self->OnReply(i, std::move(status)); });
      if (!sent.ok()) {
        votes_[i] = Vote::kFailed;
        last_server_error_ = sent;
        rejected = true;
      }
    }
    std::weak_ptr<ReleaseOp> weak = weak_from_this();
    timer_ = core_->loop()->RunAfter(timeout, [weak] {
      std::shared_ptr<ReleaseOp> self = weak.lock();
      if (self == nullptr || self->done_) return;
      self->timer_ = 0;
      self->Evaluate(/*round_over=*/true);
    });
    if (rejected) {
      std::weak_ptr<ReleaseOp> w = weak_from_this();
      core_->loop()->RunAfter(absl::ZeroDuration(), [w] {
        std::shared_ptr<ReleaseOp> self = w.lock();
        if (self != nullptr && !self->done_) self->Evaluate(false);
      });
    }
  }

  bool Cancel() override { return false; }

  void Shutdown() override {
    if (done_) return;
    std::shared_ptr<ReleaseOp> self = shared_from_this();
    CancelTimer();
    done_ = true;
    core_->Unregister(this);
    StatusCallback callback = std::move(callback_);
    callback_ = nullptr;
    absl::Status status = absl::CancelledError("RedLock destroyed");
    Report(status);
    core_->loop()->RunAfter(absl::ZeroDuration(),
                            [callback = std::move(callback), status]() mutable {
                              std::move(callback)(status);
                            });
  }

 private:
  enum class Vote { kPending, kReleased, kAbsent, kFailed };

  void OnReply(size_t i, absl::Status status) {
    core_->ReportVote(resource_, "release", i, status, core_->loop()->Now() - t0_);
    core_->NoteResult(i, status);
    if (done_) return;
    if (status.ok()) {
      votes_[i] = Vote::kReleased;
    } else if (absl::IsFailedPrecondition(status)) {
      votes_[i] = Vote::kAbsent;
    } else {
      votes_[i] = Vote::kFailed;
      last_server_error_ = status;
    }
    Evaluate(false);
  }

  void Evaluate(bool round_over) {
    if (done_) return;
    int released = 0, absent = 0, pending = 0, failed = 0;
    for (Vote v : votes_) {
      switch (v) {
        case Vote::kPending: ++pending; break;
        case Vote::kReleased: ++released; break;
        case Vote::kAbsent: ++absent; break;
        case Vote::kFailed: ++failed; break;
      }
    }
    if (round_over) {
      failed += pending;
      pending = 0;
    }
    const int quorum = core_->quorum();
    // Decided at quorum: a quorum confirmed and one of them deleted the key
    // (the rest completes in the background, its votes still reported), or
    // a quorum of confirmations is impossible. Otherwise (so far only
    // "did not hold the token") wait: a straggler may still delete it.
    const bool released_by_quorum = released > 0 && released + absent >= quorum;
    if (!released_by_quorum && pending > 0 &&
        released + absent + pending >= quorum) {
      return;
    }
    const std::string counts = absl::StrFormat(
        "%d of %d servers released, %d did not hold the token, %d failed",
        released, static_cast<int>(votes_.size()), absent, failed);
    if (released + absent >= quorum) {
      if (released > 0) {
        Finish(absl::OkStatus());
      } else {
        Finish(absl::FailedPreconditionError(
            absl::StrCat("release: the lease no longer owns the key: ", counts)));
      }
    } else {
      Finish(absl::UnavailableError(absl::StrCat(
          "release: fewer than ", quorum, " servers confirmed: ", counts,
          last_server_error_.ok() ? "" : "; last error: ",
          last_server_error_.ok() ? "" : last_server_error_.ToString())));
    }
  }

  void CancelTimer() {
    if (timer_ != 0) {
      core_->loop()->Cancel(timer_);
      timer_ = 0;
    }
  }

  void Report(const absl::Status& status) {
    ReleaseEvent event;
    event.policy = kPolicy;
    event.resource = resource_;
    event.status = status;
    event.latency = core_->loop()->Now() - t0_;
    core_->observer()->OnRelease(event);
  }

  void Finish(absl::Status status) {
    CancelTimer();
    done_ = true;
    std::shared_ptr<ReleaseOp> self = shared_from_this();
    StatusCallback callback = std::move(callback_);
    callback_ = nullptr;
    core_->Unregister(this);
    Report(status);
    std::move(callback)(std::move(status));
  }

  const std::shared_ptr<Core> core_;
  const std::string resource_;
  const std::string token_;
  const absl::Duration ttl_;
  StatusCallback callback_;
  absl::Time t0_;
  std::vector<Vote> votes_;
  absl::Status last_server_error_;
  TimerId timer_ = 0;
  bool done_ = false;
};

}  // namespace
}  // namespace redlock_internal

using redlock_internal::AcquireOp;
using redlock_internal::Core;
using redlock_internal::ExtendOp;
using redlock_internal::ReleaseOp;

absl::StatusOr<std::unique_ptr<RedLock>> RedLock::Create(
    EventLoop* loop, std::vector<Transport*> servers, RedLockOptions options) {
  if (loop == nullptr) return absl::InvalidArgumentError("RedLock: loop is null");
  if (servers.empty()) {
    return absl::InvalidArgumentError("RedLock: needs at least one server");
  }
  absl::flat_hash_set<Transport*> seen;
  for (Transport* t : servers) {
    if (t == nullptr) return absl::InvalidArgumentError("RedLock: a server is null");
    if (!seen.insert(t).second) {
      return absl::InvalidArgumentError(
          "RedLock: the same transport is listed twice (its votes would count twice)");
    }
  }
  const int n = static_cast<int>(servers.size());
  const int majority = n / 2 + 1;
  int quorum = options.quorum == 0 ? majority : options.quorum;
  if (quorum < majority || quorum > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedLock: quorum ", options.quorum, " is impossible for ", n,
        " servers: it must lie in [", majority, ", ", n, "]"));
  }
  if (options.retry_count < 0) {
    return absl::InvalidArgumentError("RedLock: retry_count must be >= 0");
  }
  if (options.retry_delay < absl::ZeroDuration() ||
      options.retry_jitter < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "RedLock: retry_delay and retry_jitter must be >= 0");
  }
  if (!(options.drift_factor >= 0.0 && options.drift_factor < 0.5)) {
    return absl::InvalidArgumentError("RedLock: drift_factor must be in [0, 0.5)");
  }
  if (options.server_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RedLock: server_timeout must be >= 0");
  }
  if (options.release_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RedLock: release_timeout must be >= 0");
  }
  if (options.max_ttl < kMinTtl || options.max_ttl > kMaxTtl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedLock: max_ttl must be in [", absl::FormatDuration(kMinTtl), ", ",
        absl::FormatDuration(kMaxTtl), "]"));
  }
  if (options.restart_window != absl::ZeroDuration() &&
      options.restart_window < options.max_ttl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedLock: restart_window ", absl::FormatDuration(options.restart_window),
        " must be 0 (= max_ttl) or >= max_ttl ", absl::FormatDuration(options.max_ttl),
        ": a lease must not outlive the window"));
  }
  if (options.restart_window > kMaxTtl) {
    return absl::InvalidArgumentError("RedLock: restart_window must be <= 30 days");
  }
  if (!options.server_names.empty() &&
      options.server_names.size() != servers.size()) {
    return absl::InvalidArgumentError(
        "RedLock: server_names must be empty or name every server");
  }
  auto core = std::make_shared<Core>(loop, std::move(options), quorum, servers);
  return std::unique_ptr<RedLock>(new RedLock(std::move(core)));
}

RedLock::RedLock(std::shared_ptr<Core> core) : core_(std::move(core)) {}

RedLock::~RedLock() { core_->Shutdown(); }

namespace {

absl::Status ValidateLeaseTtl(const Core& core, absl::Duration ttl) {
  return dlock::ValidateLeaseTtl(ttl, core.options().max_ttl, core.options().drift_factor, redlock_internal::kDriftConstant);
}

absl::Status ValidateLease(const Lease& lease) {
  absl::Status s = ValidateResource(lease.resource);
  if (!s.ok()) return s;
  if (lease.token.empty()) return absl::InvalidArgumentError("lease has no token");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AcquireHandle> RedLock::Acquire(absl::string_view resource,
                                               const AcquireOptions& options,
                                               LeaseCallback callback) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  s = ValidateLeaseTtl(*core_, options.ttl);
  if (!s.ok()) return s;
  if (options.wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("wait must be >= 0");
  }
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  if (!core_->misconfigured().ok()) return core_->misconfigured();
  auto op = std::make_shared<AcquireOp>(core_, resource, options, std::move(callback));
  core_->Register(op);
  op->Start();
  return AcquireHandle(std::weak_ptr<Cancellable>(op));
}

absl::Status RedLock::Release(const Lease& lease, StatusCallback callback) {
  absl::Status s = ValidateLease(lease);
  if (!s.ok()) return s;
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  auto op = std::make_shared<ReleaseOp>(core_, lease, std::move(callback));
  core_->Register(op);
  op->Start();
  return absl::OkStatus();
}

absl::Status RedLock::Extend(const Lease& lease, absl::Duration ttl,
                             LeaseCallback callback) {
  absl::Status s = ValidateLease(lease);
  if (!s.ok()) return s;
  s = ValidateLeaseTtl(*core_, ttl);
  if (!s.ok()) return s;
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  if (!core_->misconfigured().ok()) return core_->misconfigured();
  auto op = std::make_shared<ExtendOp>(core_, lease, ttl, std::move(callback));
  core_->Register(op);
  op->Start();
  return absl::OkStatus();
}

size_t RedLock::server_count() const { return core_->n(); }
int RedLock::quorum() const { return core_->quorum(); }
absl::Duration RedLock::ServerTimeout(absl::Duration ttl) const {
  return core_->Timeout(ttl);
}
absl::Duration RedLock::DriftAllowance(absl::Duration ttl) const {
  return core_->Drift(ttl);
}

RedLock::ServerStatus RedLock::server_status(size_t index) const {
  return core_->Status(index);
}

}  // namespace dlock
