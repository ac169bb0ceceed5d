#include "dlock/lock/observer.h"

#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dlock/lock/error_text.h"

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
  // One ErrorText call per line (lock/error_text.h): renders as StrCat and
  // FormatDuration did, in a fraction of the code.
  std::string line =
      ErrorText("acquire % %: % in % (%%, waited %)",
                {e.policy, Quoted(e.resource), Outcome(e.status), e.latency, e.attempts,
                 e.attempts == 1 ? " attempt" : " attempts", e.waited});
  if (e.status.ok()) line += ErrorText(" fence=% ttl=%", {e.fence, e.ttl});
  sink_(line);
}

void TextLockObserver::OnAcquireWait(const AcquireWaitEvent& e) {
  sink_(ErrorText("wait % %: attempt % got %; next attempt within %, % of wait left",
                  {e.policy, Quoted(e.resource), e.attempt, Outcome(e.last_error),
                   e.next_attempt_in, e.wait_left}));
}

void TextLockObserver::OnRelease(const ReleaseEvent& e) {
  sink_(ErrorText("release % %: % in %%%",
                  {e.policy, Quoted(e.resource), Outcome(e.status), e.latency,
                   e.warning.empty() ? "" : "; warning: ", e.warning}));
}

void TextLockObserver::OnExtend(const ExtendEvent& e) {
  sink_(ErrorText("extend % % to %: % in %",
                  {e.policy, Quoted(e.resource), e.ttl, Outcome(e.status), e.latency}));
}

void TextLockObserver::OnRenewal(const RenewalEvent& e) {
  sink_(ErrorText("renewal %: % in %, margin % (#%)",
                  {Quoted(e.resource), Outcome(e.status), e.latency, e.margin, e.renewal}));
}

void TextLockObserver::OnLeaseLost(const LeaseLostEvent& e) {
  sink_(ErrorText("lost % after %: %", {Quoted(e.resource), e.held_for, Outcome(e.status)}));
}

void TextLockObserver::OnServerVote(const ServerVoteEvent& e) {
  sink_(ErrorText("vote % % server #%%%: % in %",
                  {e.operation, Quoted(e.resource), e.server, e.server_name.empty() ? "" : " ",
                   e.server_name, Outcome(e.status), e.latency}));
}

void TextLockObserver::OnLateGrant(const LateGrantEvent& e) {
  std::string server;
  if (e.server >= 0) {
    server = ErrorText(" server #%%%",
                       {e.server, e.server_name.empty() ? "" : " ", e.server_name});
  }
  const absl::string_view why = e.reason == kLateGrantReleased ? "lease released" : e.reason;
  sink_(ErrorText("late grant % % %%: released again (%)",
                  {e.policy, e.operation, Quoted(e.resource), server, why}));
}

}  // namespace dlock
