#include "dlock/redlock/run_id_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dlock/lock/reply_status.h"

namespace dlock {
namespace redlock_internal {
namespace {

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

bool IsServerFailure(const absl::Status& s) {
  return !s.ok() && !absl::IsAborted(s) && !absl::IsFailedPrecondition(s) &&
         !IsYoungDataSet(s);
}

RunIdTracker::RunIdTracker(EventLoop* loop, const RedLockOptions& options,
                           const std::vector<Transport*>& transports)
    : loop_(loop), options_(options), servers_(transports.size()) {
  for (size_t i = 0; i < transports.size(); ++i) servers_[i].transport = transports[i];
}

absl::Duration RunIdTracker::RestartWindow() const {
  if (!options_.delayed_restart) return absl::ZeroDuration();
  return options_.restart_window > absl::ZeroDuration() ? options_.restart_window
                                                        : options_.max_ttl;
}

void RunIdTracker::NoteYoung(size_t i, const absl::Status& status) {
  servers_[i].young_until =
      std::max(servers_[i].young_until, loop_->Now() + YoungDataSetTimeLeft(status));
}

bool RunIdTracker::Confirmed(const Server& s, const Probe& probe) {
  if (probe.id != 0) return s.last_ok_probe >= probe.id;
  return probe.epoch != 0 && probe.epoch == s.verified_epoch &&
         s.transport->connection_epoch() == probe.epoch;
}

bool RunIdTracker::Counted(size_t i, absl::Time now, const Probe& probe) const {
  if (!options_.delayed_restart) return true;
  const Server& s = servers_[i];
  if (s.probe_supported && !Confirmed(s, probe)) return false;
  return now >= s.restart_seen + RestartWindow();
}

Probe RunIdTracker::BeforeLockCommand(size_t i, absl::Duration timeout, bool gates_votes) {
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
  std::weak_ptr<RunIdTracker> weak = weak_from_this();
  absl::Status sent = s.transport->Send(
      {"INFO", "server"}, timeout, [weak, i, id, epoch](absl::StatusOr<Reply> reply) {
        std::shared_ptr<RunIdTracker> tracker = weak.lock();
        if (tracker != nullptr) tracker->OnProbeReply(i, id, epoch, reply);
      });
  if (!sent.ok()) {
    s.probe_needed = true;
    return probe;
  }
  probe.id = id;
  return probe;
}

void RunIdTracker::NoteResult(size_t i, const absl::Status& status) {
  if (IsServerFailure(status)) servers_[i].probe_needed = true;
}

RedLock::ServerStatus RunIdTracker::Status(size_t i) const {
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

void RunIdTracker::OnProbeReply(size_t i, uint64_t id, uint64_t epoch,
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

// Two listings of one Redis instance (same run_id: same host and port under
// two names, or two DB numbers of one server) would let one server vote
// twice. Once seen, every operation fails with kInvalidArgument.
void RunIdTracker::CheckDistinct(size_t i) {
  if (!misconfigured_.ok()) return;
  for (size_t j = 0; j < servers_.size(); ++j) {
    if (j == i || servers_[j].run_id != servers_[i].run_id) continue;
    const size_t a = std::min(i, j), b = std::max(i, j);
    misconfigured_ = absl::InvalidArgumentError(absl::StrCat(
        "RedLock: ", Name(a), " and ", Name(b), " are the same Redis instance (run_id ",
        servers_[i].run_id,
        "); RedLock needs independent servers, or one server's votes count twice"));
    return;
  }
}

std::string RunIdTracker::Name(size_t i) const {
  if (i < options_.server_names.size() && !options_.server_names[i].empty()) {
    return absl::StrCat("server ", i, " (", options_.server_names[i], ")");
  }
  return absl::StrCat("server ", i);
}

}  // namespace redlock_internal
}  // namespace dlock
