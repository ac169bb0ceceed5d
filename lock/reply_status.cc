#include "dlock/lock/reply_status.h"

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/error_text.h"

namespace dlock {

namespace {
// The refusal's message: "data set began <age> ms ago (<key>): young, <left>
// ms left of the restart window; ..." (a message rather than a payload, so
// Status::ToString() stays readable).
constexpr absl::string_view kYoungPrefix = "data set began ";
constexpr absl::string_view kYoungLeft = "): young, ";
}  // namespace



bool IsYoungDataSet(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         absl::StartsWith(status.message(), kYoungPrefix) &&
         absl::StrContains(status.message(), kYoungLeft);
}

absl::Duration YoungDataSetTimeLeft(const absl::Status& status) {
  if (!IsYoungDataSet(status)) return absl::ZeroDuration();
  absl::string_view m = status.message();
  m.remove_prefix(m.find(kYoungLeft) + kYoungLeft.size());
  int64_t ms = 0;
  if (!absl::SimpleAtoi(m.substr(0, m.find(' ')), &ms)) return absl::ZeroDuration();
  return absl::Milliseconds(ms);
}

std::optional<absl::Duration> YoungTimeLeftQuoted(absl::string_view message) {
  const size_t at = message.rfind(kYoungLeft);
  if (at == absl::string_view::npos) return std::nullopt;
  message.remove_prefix(at + kYoungLeft.size());
  int64_t ms = 0;
  if (!absl::SimpleAtoi(message.substr(0, message.find(' ')), &ms)) return std::nullopt;
  return absl::Milliseconds(ms);
}

std::optional<absl::Status> AcquireRefusalStatus(const KeyScheme& keys,
                                                 absl::string_view resource,
                                                 const Reply& reply) {
  if (!reply.is_array()) return std::nullopt;
  return AcquireRefusalStatus(keys.LockKey(resource), keys.FenceHwmKey(resource),
                              keys.DataSetKey(resource), reply);
}

std::optional<absl::Status> AcquireRefusalStatus(absl::string_view lock_key,
                                                 absl::string_view fence_key,
                                                 absl::string_view data_set_key,
                                                 const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_string()) {
    return std::nullopt;
  }
  const std::vector<Reply>& e = reply.elements;
  const std::string& kind = e[0].str;
  if (kind == "young" && e.size() == 3 && e[1].is_integer() && e[2].is_integer()) {
    // (Begins with kYoungPrefix and holds kYoungLeft: IsYoungDataSet.)
    return ErrorStatus(
        absl::StatusCode::kUnavailable,
        "data set began % ms ago (%): young, % ms left of the restart window; a server "
        "that may have lost data does not grant until every lease it could have granted "
        "has expired. Only if the server never held dlock locks (just deployed) or kept "
        "its data (persistence) may it vote at once: declare its data set trusted with "
        "`dlock trust --force --redis URL` (or SET % 0); never after a restart that lost "
        "data (then wait out the window)",
        {e[2].integer, data_set_key, e[1].integer, data_set_key});
  }
  if (kind == "foreign" && e.size() == 3 && e[1].is_string() && e[1].str == "marker") {
    return ErrorStatus(absl::StatusCode::kInternal,
                       "foreign data under the data-set marker key %: % is not a time in ms",
                       {data_set_key, e[2].DebugString()});
  }
  if (kind == "foreign" && e.size() == 3 && e[1].is_string() && e[2].is_integer()) {
    return ErrorStatus(absl::StatusCode::kInternal,
                       "foreign data under the lock key %: a %%, not a dlock lock of this "
                       "kind; left untouched",
                       {lock_key, e[1].str, e[2].integer < 0 ? " with no TTL" : " with a TTL"});
  }
  if (kind == "exhausted" && (e.size() == 2 || (e.size() == 3 && e[2].is_string()))) {
    // {'exhausted', value, key}: the script names the fence mark it read.
    return ErrorStatus(absl::StatusCode::kInternal,
                       "the fencing counter % is exhausted (%): no larger fence can be "
                       "issued exactly",
                       {e.size() == 3 ? absl::string_view(e[2].str) : fence_key, e[1].str});
  }
  return std::nullopt;
}

absl::Status ErrorReplyStatus(const Reply& reply) {
  const absl::string_view text = reply.str;
  // The error code is the first word ("ERR" when the server gave none). An
  // error inside a script keeps the failing call's code (Redis 7 appends
  // " script: <sha>, on @user_script:<line>.").
  const absl::string_view code = text.substr(0, text.find(' '));
  // One message, "<prefix><the server's text>", built once below (one
  // StrCat instead of one per outcome: smaller code, same messages).
  absl::StatusCode status = absl::StatusCode::kInternal;
  absl::string_view prefix = "server error: ";
  // Transient: failover, memory pressure, loading, a busy script, cluster or
  // replica trouble, too many clients. Worth another attempt.
  static constexpr absl::string_view kTransient[] = {
      "READONLY", "OOM",         "LOADING",    "BUSY",   "MASTERDOWN",
      "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "MISCONF"};
  bool transient = absl::StartsWith(text, "ERR max number of clients");
  for (absl::string_view t : kTransient) transient = transient || code == t;
  if (code == "NOPERM" || code == "NOAUTH" || code == "WRONGPASS" ||
      absl::StartsWith(text, "ERR The user executing the script can't") ||
      // A client that did not authenticate may not send more than 10
      // arguments (the read-write lock's scripts take more); the server
      // answers this instead of NOAUTH (and closes the connection).
      absl::StartsWith(text, "ERR Protocol error: unauthenticated")) {
    // Permanent: the user may not do this; retrying cannot help.
    status = absl::StatusCode::kPermissionDenied;
    prefix = "server refused: ";
  } else if (transient) {
    status = absl::StatusCode::kUnavailable;
  } else if (code == "WRONGTYPE" || absl::StrContains(text, "value is not an integer")) {
    // Permanent: foreign data under a lock or fence key.
    prefix = "foreign data under a lock key: ";
  } else if (absl::StrContains(text, "increment or decrement would overflow")) {
    prefix = "the resource's fencing counter is at its maximum (2^63 - 1): ";
  }
  // Everything else (unknown command, a script error, a code we do not
  // know) is permanent: retrying the same script cannot fix it.
  return absl::Status(status, absl::StrCat(prefix, text));
}

absl::Status UnexpectedReplyStatus(absl::string_view what, const Reply& reply) {
  if (reply.is_error()) return ErrorReplyStatus(reply);
  return absl::InternalError(
      absl::StrCat("unexpected reply to ", what, ": ", reply.DebugString()));
}

std::string UnpublishedReleaseWarning(absl::string_view publish_error) {
  return ErrorText(
      "released, but the release notification was refused (%): waiters on other "
      "connections will not be woken and retry only on their backoff timers; give the "
      "Redis user channel permission (ACL &<pattern>)",
      {publish_error});
}

}  // namespace dlock
