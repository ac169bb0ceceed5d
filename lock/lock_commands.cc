#include "dlock/lock/lock_commands.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/reply.h"

namespace dlock {

LockCommands::LockCommands(Transport* transport, KeyScheme keys)
    : transport_(transport), keys_(std::move(keys)) {
  // A cluster keeps one data-set marker per slot (see keys.h).
  if (transport_ != nullptr && transport_->cluster()) keys_.per_slot_data_set = true;
}

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
      {keys_.LockKey(resource), keys_.FenceKey(resource), keys_.DataSetKey(resource)},
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

}  // namespace dlock
