#include "dlock/lock/lock_commands.h"

#include <openssl/rand.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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

absl::Status ValidateTtl(absl::Duration ttl) {
  if (ttl < kMinTtl || ttl > kMaxTtl) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl ", absl::FormatDuration(ttl), " is outside [",
                     absl::FormatDuration(kMinTtl), ", ",
                     absl::FormatDuration(kMaxTtl), "]"));
  }
  return absl::OkStatus();
}

int64_t TtlMillis(absl::Duration ttl) { return absl::ToInt64Milliseconds(ttl); }

absl::Duration WholeMillis(absl::Duration ttl) {
  return absl::Milliseconds(TtlMillis(ttl));
}

std::string NewToken() {
  unsigned char bytes[16];
  // OpenSSL's CSPRNG: seeded by the OS, thread-safe, and reseeded after
  // fork(), so a forked worker never repeats its parent's tokens (a
  // thread-local PRNG copied by fork would).
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // Practically unreachable; fall back to a freshly seeded Abseil
    // generator rather than failing the acquisition.
    absl::BitGen gen;
    for (unsigned char& b : bytes) b = absl::Uniform<unsigned char>(gen);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
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

absl::Status ErrorReplyStatus(const Reply& reply) {
  // WRONGTYPE: a lock/fence key of the wrong kind. "not an integer": a
  // fence key holding something else. Both are foreign data, not an outage.
  if (reply.IsErrorWithPrefix("WRONGTYPE") ||
      absl::StrContains(reply.str, "value is not an integer")) {
    return absl::InternalError(absl::StrCat("foreign data under a lock key: ", reply.str));
  }
  return absl::UnavailableError(absl::StrCat("server error: ", reply.str));
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
    absl::Duration timeout, absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  s = ValidateTtl(ttl);
  if (!s.ok()) return s;
  return AcquireScript().Run(
      *transport_, {keys_.LockKey(resource), keys_.FenceKey(resource)},
      {std::string(token), absl::StrCat(TtlMillis(ttl))}, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        if (!reply.ok()) {
          std::move(cb)(reply.status());
        } else if (reply->is_nil()) {
          std::move(cb)(absl::AbortedError("lock is held by another owner"));
        } else if (reply->is_integer() && reply->integer >= 1) {
          std::move(cb)(reply->integer);
        } else {
          std::move(cb)(UnexpectedReplyStatus("acquire", *reply));
        }
      });
}

absl::Status LockCommands::Release(absl::string_view resource,
                                   absl::string_view token, absl::Duration timeout,
                                   absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  return ReleaseScript().Run(
      *transport_, {keys_.LockKey(resource)},
      {std::string(token), keys_.ChannelKey(resource)}, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
        std::move(cb)(OwnedReplyStatus("release", reply));
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

}  // namespace dlock
