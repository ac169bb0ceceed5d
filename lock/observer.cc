#include "dlock/lock/observer.h"

#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dlock {
namespace {

std::string Quoted(absl::string_view resource) {
  return absl::StrCat("\"", absl::CEscape(resource), "\"");
}

std::string Outcome(const absl::Status& status) {
  return status.ok() ? std::string("OK") : status.ToString();
}

}  // namespace

LockObserver* NoopLockObserver() {
  static LockObserver* const kNoop = new LockObserver();
  return kNoop;
}

TextLockObserver::TextLockObserver(Sink sink) : sink_(std::move(sink)) {}

void TextLockObserver::OnAcquire(const AcquireEvent& e) {
  std::string line = absl::StrCat(
      "acquire ", e.policy, " ", Quoted(e.resource), ": ", Outcome(e.status),
      " in ", absl::FormatDuration(e.latency), " (", e.attempts,
      e.attempts == 1 ? " attempt" : " attempts", ", waited ",
      absl::FormatDuration(e.waited), ")");
  if (e.status.ok()) {
    absl::StrAppend(&line, " fence=", e.fence,
                    " ttl=", absl::FormatDuration(e.ttl));
  }
  sink_(line);
}

void TextLockObserver::OnAcquireWait(const AcquireWaitEvent& e) {
  sink_(absl::StrCat("wait ", e.policy, " ", Quoted(e.resource), ": attempt ",
                     e.attempt, " got ", Outcome(e.last_error),
                     "; next attempt within ",
                     absl::FormatDuration(e.next_attempt_in), ", ",
                     absl::FormatDuration(e.wait_left), " of wait left"));
}

void TextLockObserver::OnRelease(const ReleaseEvent& e) {
  sink_(absl::StrCat("release ", e.policy, " ", Quoted(e.resource), ": ",
                     Outcome(e.status), " in ",
                     absl::FormatDuration(e.latency),
                     e.warning.empty() ? "" : "; warning: ", e.warning));
}

void TextLockObserver::OnExtend(const ExtendEvent& e) {
  sink_(absl::StrCat("extend ", e.policy, " ", Quoted(e.resource), " to ",
                     absl::FormatDuration(e.ttl), ": ", Outcome(e.status),
                     " in ", absl::FormatDuration(e.latency)));
}

void TextLockObserver::OnRenewal(const RenewalEvent& e) {
  sink_(absl::StrCat("renewal ", Quoted(e.resource), ": ", Outcome(e.status),
                     " in ", absl::FormatDuration(e.latency), ", margin ",
                     absl::FormatDuration(e.margin), " (#", e.renewal, ")"));
}

void TextLockObserver::OnLeaseLost(const LeaseLostEvent& e) {
  sink_(absl::StrCat("lost ", Quoted(e.resource), " after ",
                     absl::FormatDuration(e.held_for), ": ",
                     Outcome(e.status)));
}

void TextLockObserver::OnServerVote(const ServerVoteEvent& e) {
  std::string server = e.server_name.empty()
                           ? absl::StrCat("#", e.server)
                           : absl::StrCat("#", e.server, " ", e.server_name);
  sink_(absl::StrCat("vote ", e.operation, " ", Quoted(e.resource), " server ",
                     server, ": ", Outcome(e.status), " in ",
                     absl::FormatDuration(e.latency)));
}

void TextLockObserver::OnLateGrant(const LateGrantEvent& e) {
  std::string server;
  if (e.server >= 0) {
    server = e.server_name.empty() ? absl::StrCat(" server #", e.server)
                                   : absl::StrCat(" server #", e.server, " ", e.server_name);
  }
  const absl::string_view why = e.reason == kLateGrantReleased ? "lease released" : e.reason;
  sink_(absl::StrCat("late grant ", e.policy, " ", e.operation, " ", Quoted(e.resource), server,
                     ": released again (", why, ")"));
}

}  // namespace dlock
