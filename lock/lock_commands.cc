#include "dlock/lock/lock_commands.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/reply.h"

namespace dlock {

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

}  // namespace

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

absl::StatusOr<int64_t> AcquireReplyFence(const KeyScheme& keys, absl::string_view resource,
                                          const absl::StatusOr<Reply>& reply) {
  if (!reply.ok()) return reply.status();
  std::optional<absl::Status> refusal = AcquireRefusalStatus(keys, resource, *reply);
  if (refusal.has_value()) return *std::move(refusal);
  if (reply->is_nil()) return absl::AbortedError("lock is held by another owner");
  if (reply->is_integer() && reply->integer >= 1) return reply->integer;
  return UnexpectedReplyStatus("acquire", *reply);
}

absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(const absl::StatusOr<Reply>& reply) {
  if (reply.ok() && reply->is_string()) {
    // Deleted; the PUBLISH was refused (see scripts.h).
    ReleaseNotice notice;
    notice.published = false;
    notice.publish_error = reply->str;
    return notice;
  }
  absl::Status status = OwnedReplyStatus("release", reply);
  if (!status.ok()) return status;
  return ReleaseNotice();
}

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
  return RunAcknowledged(
      AcquireScript(), *transport_,
      {keys_.LockKey(resource), keys_.FenceKey(resource), keys_.DataSetKey()},
      {std::string(token), absl::StrCat(TtlMillis(ttl)),
       absl::StrCat(absl::ToInt64Milliseconds(restart_window))},
      timeout, ack_, [](const Reply& r) { return r.is_integer() && r.integer >= 1; },
      [cb = std::move(cb), keys = keys_,
       resource = std::string(resource)](absl::StatusOr<Reply> reply) mutable {
        std::move(cb)(AcquireReplyFence(keys, resource, reply));
      });
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
        std::move(cb)(ReleaseReplyNotice(reply));
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
  return RunAcknowledged(
      ExtendScript(), *transport_, {keys_.LockKey(resource)},
      {std::string(token), absl::StrCat(TtlMillis(ttl))}, timeout, ack_,
      [](const Reply& r) { return r.is_integer() && r.integer == 1; },
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

}  // namespace dlock
