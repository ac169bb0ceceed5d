#include "dlock/lock/lock_commands.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <memory>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/reply.h"

namespace dlock {

absl::Status ValidateResource(absl::string_view resource) {
  if (resource.empty()) {
    return absl::InvalidArgumentError("resource must not be empty");
  }
  if (resource.size() > kMaxResourceLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resource is ", resource.size(), " bytes; at most ", kMaxResourceLength,
        " allowed"));
  }
  return absl::OkStatus();
}

absl::Duration DriftAllowance(absl::Duration ttl, double factor,
                              absl::Duration constant) {
  return ttl * factor + constant;
}

namespace {

bool DriftOptionsValid(double factor, absl::Duration constant) {
  return factor >= 0.0 && factor < 1.0 && constant >= absl::ZeroDuration() &&
         constant < kMaxTtl;
}

}  // namespace

absl::Duration MinLeaseTtl(double drift_factor, absl::Duration drift_constant) {
  if (!DriftOptionsValid(drift_factor, drift_constant)) {
    return kMaxTtl + absl::Milliseconds(1);
  }
  // ttl - (ttl * f + c) >= V  <=>  ttl >= (V + c) / (1 - f); start just
  // below that (whole ms) and step up, so rounding never decides.
  const double bound_ms =
      absl::ToDoubleMilliseconds(kMinLeaseValidity + drift_constant) / (1.0 - drift_factor);
  absl::Duration min = kMinLeaseTtl;
  if (bound_ms > absl::ToDoubleMilliseconds(kMinLeaseTtl)) {
    min = absl::Milliseconds(static_cast<int64_t>(bound_ms) - 1);
  }
  while (min <= kMaxTtl &&
         min - DriftAllowance(min, drift_factor, drift_constant) < kMinLeaseValidity) {
    min += absl::Milliseconds(1);
  }
  return std::max(min, kMinLeaseTtl);
}

absl::Status ValidateLeaseTtl(absl::Duration ttl, absl::Duration max_ttl,
                              double drift_factor, absl::Duration drift_constant) {
  if (!DriftOptionsValid(drift_factor, drift_constant)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drift allowance ", drift_factor, " * ttl + ",
        absl::FormatDuration(drift_constant),
        " is invalid: the factor must be in [0, 1) and the constant >= 0"));
  }
  if (max_ttl < kMinLeaseTtl || max_ttl > kMaxTtl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "maximum ttl ", absl::FormatDuration(max_ttl), " is outside [",
        absl::FormatDuration(kMinLeaseTtl), ", ", absl::FormatDuration(kMaxTtl), "]"));
  }
  const absl::Duration min = MinLeaseTtl(drift_factor, drift_constant);
  // Compare the whole milliseconds that would be sent (ttl > max_ttl first:
  // WholeMillis of an infinite ttl is not meaningful).
  if (ttl > max_ttl || min > max_ttl || WholeMillis(ttl) < min) {
    std::string why;
    if (min > kMinLeaseTtl) {
      why = absl::StrCat(" (the drift allowance ", drift_factor, " * ttl + ",
                         absl::FormatDuration(drift_constant), " must leave at least ",
                         absl::FormatDuration(kMinLeaseValidity), " of validity)");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "ttl ", absl::FormatDuration(ttl), " is outside the accepted range [",
        absl::FormatDuration(min), ", ", absl::FormatDuration(max_ttl), "]", why));
  }
  return absl::OkStatus();
}

absl::Status ValidateTtl(absl::Duration ttl) { return ValidateLeaseTtl(ttl); }

int64_t TtlMillis(absl::Duration ttl) { return absl::ToInt64Milliseconds(ttl); }

absl::Duration WholeMillis(absl::Duration ttl) {
  return absl::Milliseconds(TtlMillis(ttl));
}

namespace {

// Bumped in the child of every fork(), so a thread-local token buffer copied
// into the child is thrown away instead of handing out the parent's tokens.
std::atomic<uint64_t> fork_generation{0};
void BumpForkGeneration() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Random bytes for kTokensPerRefill tokens, drawn from OpenSSL in one call:
// RAND_bytes costs about 10,000 instructions a call (provider lookup,
// locking, fork check), which was a third of the client-side cost of an
// acquire+release cycle (bench/RESULTS.md). One call per 64 tokens keeps the
// same CSPRNG at a 64th of the cost.
constexpr size_t kTokenBytes = 16;
constexpr size_t kTokensPerRefill = 64;
struct TokenBuffer {
  unsigned char bytes[kTokenBytes * kTokensPerRefill];
  size_t next = sizeof(bytes);  // empty
  uint64_t generation = 0;
};

void Refill(TokenBuffer& buf) {
  // OpenSSL's CSPRNG: seeded by the OS, thread-safe, reseeded after fork.
  if (RAND_bytes(buf.bytes, sizeof(buf.bytes)) != 1) {
    // Practically unreachable; fall back to a freshly OS-seeded Abseil
    // generator rather than failing the acquisition.
    absl::BitGen gen;
    for (unsigned char& b : buf.bytes) b = absl::Uniform<unsigned char>(gen);
  }
  buf.next = 0;
}

}  // namespace

std::string NewToken() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &BumpForkGeneration);
    return true;
  }();
  (void)registered;
  thread_local TokenBuffer buf;
  const uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (buf.next + kTokenBytes > sizeof(buf.bytes) || buf.generation != generation) {
    Refill(buf);
    buf.generation = generation;
  }
  unsigned char* token = buf.bytes + buf.next;
  buf.next += kTokenBytes;
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(token), kTokenBytes));
  // Never keep a handed-out token in memory longer than needed.
  OPENSSL_cleanse(token, kTokenBytes);
  return hex;
}

absl::StatusOr<Lease> FinishAcquire(const AcquireAttempt& attempt,
                                    absl::StatusOr<int64_t> fence, absl::Time now,
                                    LockObserver* observer,
                                    absl::FunctionRef<void()> undo) {
  absl::StatusOr<Lease> result;
  if (fence.ok()) {
    if (now >= attempt.deadline) {
      undo();
      result = absl::DeadlineExceededError(absl::StrCat(
          "acquire reply came ", absl::FormatDuration(now - attempt.sent_at),
          " after sending, past the lease deadline"));
    } else {
      Lease lease;
      lease.resource = std::string(attempt.resource);
      lease.token = std::string(attempt.token);
      lease.fence = *fence;
      lease.ttl = attempt.ttl;
      lease.deadline = attempt.deadline;
      result = std::move(lease);
    }
  } else {
    // A refusal (held, young data set) set nothing: nothing to undo.
    if (!absl::IsAborted(fence.status()) && !IsYoungDataSet(fence.status())) undo();
    result = fence.status();
  }
  AcquireEvent event;
  event.policy = attempt.policy;
  event.resource = attempt.resource;
  event.status = result.status();
  event.latency = now - attempt.sent_at;
  event.attempts = 1;
  if (result.ok()) {
    event.fence = result->fence;
    event.ttl = result->ttl;
  }
  observer->OnAcquire(event);
  return result;
}

std::string KeyScheme::LockKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}");
}
std::string KeyScheme::FenceKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}:fence");
}
std::string KeyScheme::ChannelKey(absl::string_view resource) const {
  return absl::StrCat(prefix, "{", resource, "}:released");
}

std::string KeyScheme::DataSetKey() const {
  return absl::StrCat(prefix, "data-set-began");
}

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

std::vector<std::string> TrustDataSetCommand(const KeyScheme& keys) {
  return {"SET", keys.DataSetKey(), "0"};
}

std::optional<absl::Status> AcquireRefusalStatus(const KeyScheme& keys,
                                                 absl::string_view resource,
                                                 const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_string()) {
    return std::nullopt;
  }
  const std::vector<Reply>& e = reply.elements;
  const std::string& kind = e[0].str;
  if (kind == "young" && e.size() == 3 && e[1].is_integer() && e[2].is_integer()) {
    return absl::UnavailableError(absl::StrCat(
        kYoungPrefix, e[2].integer, " ms ago (", keys.DataSetKey(), kYoungLeft,
        e[1].integer,
        " ms left of the restart window; a server that may have lost data "
        "does not grant until every lease it could have granted has expired"));
  }
  if (kind == "foreign" && e.size() == 3 && e[1].is_string() && e[1].str == "marker") {
    return absl::InternalError(absl::StrCat(
        "foreign data under the data-set marker key ", keys.DataSetKey(), ": ",
        e[2].DebugString(), " is not a time in ms"));
  }
  if (kind == "foreign" && e.size() == 3 && e[1].is_string() && e[2].is_integer()) {
    return absl::InternalError(absl::StrCat(
        "foreign data under the lock key ", keys.LockKey(resource), ": a ", e[1].str,
        e[2].integer < 0 ? " with no TTL" : " with a TTL",
        ", not a dlock lock of this kind; left untouched"));
  }
  if (kind == "exhausted" && e.size() == 2) {
    return absl::InternalError(absl::StrCat(
        "the fencing counter ", keys.FenceKey(resource), " is exhausted (",
        e[1].str, "): no larger fence can be issued exactly"));
  }
  return std::nullopt;
}

absl::Status ErrorReplyStatus(const Reply& reply) {
  const absl::string_view text = reply.str;
  // The error code is the first word ("ERR" when the server gave none). An
  // error inside a script keeps the failing call's code (Redis 7 appends
  // " script: <sha>, on @user_script:<line>.").
  const absl::string_view code = text.substr(0, text.find(' '));
  // Permanent: the user may not do this; retrying cannot help.
  if (code == "NOPERM" || code == "NOAUTH" || code == "WRONGPASS" ||
      absl::StartsWith(text, "ERR The user executing the script can't")) {
    return absl::PermissionDeniedError(absl::StrCat("server refused: ", text));
  }
  // Transient: failover, memory pressure, loading, a busy script, cluster or
  // replica trouble, too many clients. Worth another attempt.
  static constexpr absl::string_view kTransient[] = {
      "READONLY", "OOM",         "LOADING",    "BUSY",   "MASTERDOWN",
      "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "MISCONF"};
  for (absl::string_view t : kTransient) {
    if (code == t) return absl::UnavailableError(absl::StrCat("server error: ", text));
  }
  if (absl::StartsWith(text, "ERR max number of clients")) {
    return absl::UnavailableError(absl::StrCat("server error: ", text));
  }
  // Permanent: foreign data under a lock or fence key.
  if (code == "WRONGTYPE" || absl::StrContains(text, "value is not an integer")) {
    return absl::InternalError(absl::StrCat("foreign data under a lock key: ", text));
  }
  if (absl::StrContains(text, "increment or decrement would overflow")) {
    return absl::InternalError(absl::StrCat(
        "the resource's fencing counter is at its maximum (2^63 - 1): ", text));
  }
  // Everything else (unknown command, a script error, a code we do not
  // know) is permanent: retrying the same script cannot fix it.
  return absl::InternalError(absl::StrCat("server error: ", text));
}

absl::Status UnexpectedReplyStatus(absl::string_view what, const Reply& reply) {
  if (reply.is_error()) return ErrorReplyStatus(reply);
  return absl::InternalError(
      absl::StrCat("unexpected reply to ", what, ": ", reply.DebugString()));
}

LockCommands::LockCommands(Transport* transport, KeyScheme keys)
    : transport_(transport), keys_(std::move(keys)) {}

namespace {

absl::Status ValidateCommon(absl::string_view resource, absl::string_view token,
                            absl::Duration timeout) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  if (token.empty()) return absl::InvalidArgumentError("token must not be empty");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  return absl::OkStatus();
}

// Maps a 1/0 script reply to OK / kFailedPrecondition.
absl::Status OwnedReplyStatus(absl::string_view what,
                              const absl::StatusOr<Reply>& reply) {
  if (!reply.ok()) return reply.status();
  if (reply->is_integer() && reply->integer == 1) return absl::OkStatus();
  if (reply->is_integer() && reply->integer == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the lease no longer owns the key"));
  }
  return UnexpectedReplyStatus(what, *reply);
}

}  // namespace

absl::Status LockCommands::TryAcquire(
    absl::string_view resource, absl::string_view token, absl::Duration ttl,
    absl::Duration restart_window, absl::Duration timeout,
    absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  s = ValidateTtl(ttl);
  if (!s.ok()) return s;
  if (restart_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("restart window must be >= 0");
  }
  return AcquireScript().Run(
      *transport_,
      {keys_.LockKey(resource), keys_.FenceKey(resource), keys_.DataSetKey()},
      {std::string(token), absl::StrCat(TtlMillis(ttl)),
       absl::StrCat(absl::ToInt64Milliseconds(restart_window))},
      timeout,
      [cb = std::move(cb), keys = keys_,
       resource = std::string(resource)](absl::StatusOr<Reply> reply) mutable {
        std::optional<absl::Status> refusal;
        if (reply.ok()) refusal = AcquireRefusalStatus(keys, resource, *reply);
        if (!reply.ok()) {
          std::move(cb)(reply.status());
        } else if (refusal.has_value()) {
          std::move(cb)(*std::move(refusal));
        } else if (reply->is_nil()) {
          std::move(cb)(absl::AbortedError("lock is held by another owner"));
        } else if (reply->is_integer() && reply->integer >= 1) {
          std::move(cb)(reply->integer);
        } else {
          std::move(cb)(UnexpectedReplyStatus("acquire", *reply));
        }
      });
}

std::string UnpublishedReleaseWarning(absl::string_view publish_error) {
  return absl::StrCat(
      "released, but the release notification was refused (", publish_error,
      "): waiters on other connections will not be woken and retry only on their "
      "backoff timers; give the Redis user channel permission (ACL &<pattern>)");
}

absl::Status LockCommands::ReleaseNotifying(
    absl::string_view resource, absl::string_view token, absl::Duration timeout,
    absl::AnyInvocable<void(absl::StatusOr<ReleaseNotice>) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  return ReleaseScript().Run(
      *transport_, {keys_.LockKey(resource)},
      {std::string(token), keys_.ChannelKey(resource)}, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        if (reply.ok() && reply->is_string()) {
          // Deleted; the PUBLISH was refused (see scripts.h).
          ReleaseNotice notice;
          notice.published = false;
          notice.publish_error = reply->str;
          std::move(cb)(std::move(notice));
          return;
        }
        absl::Status status = OwnedReplyStatus("release", reply);
        if (!status.ok()) {
          std::move(cb)(std::move(status));
        } else {
          std::move(cb)(ReleaseNotice());
        }
      });
}

absl::Status LockCommands::Release(absl::string_view resource,
                                   absl::string_view token, absl::Duration timeout,
                                   absl::AnyInvocable<void(absl::Status) &&> cb) {
  return ReleaseNotifying(
      resource, token, timeout,
      [cb = std::move(cb)](absl::StatusOr<ReleaseNotice> notice) mutable {
        std::move(cb)(notice.status());
      });
}

absl::Status LockCommands::Extend(absl::string_view resource,
                                  absl::string_view token, absl::Duration ttl,
                                  absl::Duration timeout,
                                  absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  s = ValidateTtl(ttl);
  if (!s.ok()) return s;
  return ExtendScript().Run(
      *transport_, {keys_.LockKey(resource)},
      {std::string(token), absl::StrCat(TtlMillis(ttl))}, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        std::move(cb)(OwnedReplyStatus("extend", reply));
      });
}

absl::Status LockCommands::ExtendOrReacquire(
    absl::string_view resource, absl::string_view token, absl::Duration ttl,
    absl::Duration timeout, absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  s = ValidateTtl(ttl);
  if (!s.ok()) return s;
  return ExtendOrReacquireScript().Run(
      *transport_, {keys_.LockKey(resource)},
      {std::string(token), absl::StrCat(TtlMillis(ttl))}, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        std::move(cb)(OwnedReplyStatus("extend", reply));
      });
}

absl::Status LockCommands::TrustDataSet(absl::Duration timeout,
                                        absl::AnyInvocable<void(absl::Status) &&> cb) {
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  return transport_->Send(
      TrustDataSetCommand(keys_), timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        if (!reply.ok()) {
          std::move(cb)(reply.status());
        } else if (reply->is_status() && reply->str == "OK") {
          std::move(cb)(absl::OkStatus());
        } else {
          std::move(cb)(UnexpectedReplyStatus("trust data set", *reply));
        }
      });
}

void BackgroundRetries::RunLater(absl::Duration delay, absl::AnyInvocable<void() &&> fn) {
  if (stopped_) return;
  auto id = std::make_shared<TimerId>(0);
  *id = loop_->RunAfter(delay, [this, id, fn = std::move(fn)]() mutable {
    timers_.erase(*id);
    std::move(fn)();
  });
  timers_.insert(*id);
}

void BackgroundRetries::Stop() {
  stopped_ = true;
  absl::flat_hash_set<TimerId> timers = std::move(timers_);
  timers_.clear();
  for (TimerId id : timers) loop_->Cancel(id);
}

}  // namespace dlock
