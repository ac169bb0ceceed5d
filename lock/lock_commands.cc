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
    : transport_(transport),
      keys_(std::move(keys)),
      data_set_key_(keys_.DataSetKey()) {}

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
  const ResourceKeys k(keys_.prefix, resource);
  const absl::string_view keys[] = {k.lock(), k.fence(), data_set_key_};
  const absl::AlphaNum ttl_ms(TtlMillis(ttl));
  const absl::AlphaNum window_ms(absl::ToInt64Milliseconds(restart_window));
  const absl::string_view args[] = {token, ttl_ms.Piece(), window_ms.Piece()};
  return AcquireScript().Invoke(
      *transport_, keys, args, timeout,
      [cb = std::move(cb)](absl::StatusOr<Reply> reply,
                           absl::Span<const absl::string_view> keys) mutable {
        std::optional<absl::Status> refusal;
        if (reply.ok()) {
          refusal = AcquireRefusalStatus(keys[0], keys[1], keys[2], *reply);
        }
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

namespace {

// The release script's reply: a ReleaseNotice, or why nothing was released.
absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(absl::StatusOr<Reply> reply) {
  if (reply.ok() && reply->is_string()) {
    // Deleted; the PUBLISH was refused (see scripts.h).
    ReleaseNotice notice;
    notice.published = false;
    notice.publish_error = std::move(reply->str);
    return notice;
  }
  absl::Status status = OwnedReplyStatus("release", reply);
  if (!status.ok()) return status;
  return ReleaseNotice();
}

}  // namespace

template <typename F>
absl::Status LockCommands::SendRelease(absl::string_view resource,
                                       absl::string_view token,
                                       absl::Duration timeout, F on_reply) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  const ResourceKeys k(keys_.prefix, resource);
  const absl::string_view keys[] = {k.lock()};
  const absl::string_view args[] = {token, k.channel()};
  return ReleaseScript().Invoke(*transport_, keys, args, timeout, std::move(on_reply));
}

absl::Status LockCommands::ReleaseNotifying(
    absl::string_view resource, absl::string_view token, absl::Duration timeout,
    absl::AnyInvocable<void(absl::StatusOr<ReleaseNotice>) &&> cb) {
  return SendRelease(resource, token, timeout,
                     [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
                       std::move(cb)(ReleaseReplyNotice(std::move(reply)));
                     });
}

absl::Status LockCommands::Release(absl::string_view resource,
                                   absl::string_view token, absl::Duration timeout,
                                   absl::AnyInvocable<void(absl::Status) &&> cb) {
  return SendRelease(resource, token, timeout,
                     [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
                       std::move(cb)(ReleaseReplyNotice(std::move(reply)).status());
                     });
}

absl::Status LockCommands::SendExtend(const Script& script, absl::string_view resource,
                                      absl::string_view token, absl::Duration ttl,
                                      absl::Duration timeout,
                                      absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommon(resource, token, timeout);
  if (!s.ok()) return s;
  s = ValidateTtl(ttl);
  if (!s.ok()) return s;
  const ResourceKeys k(keys_.prefix, resource);
  const absl::string_view keys[] = {k.lock()};
  const absl::AlphaNum ttl_ms(TtlMillis(ttl));
  const absl::string_view args[] = {token, ttl_ms.Piece()};
  return script.Invoke(*transport_, keys, args, timeout,
                       [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
                         std::move(cb)(OwnedReplyStatus("extend", reply));
                       });
}

absl::Status LockCommands::Extend(absl::string_view resource,
                                  absl::string_view token, absl::Duration ttl,
                                  absl::Duration timeout,
                                  absl::AnyInvocable<void(absl::Status) &&> cb) {
  return SendExtend(ExtendScript(), resource, token, ttl, timeout, std::move(cb));
}

absl::Status LockCommands::ExtendOrReacquire(
    absl::string_view resource, absl::string_view token, absl::Duration ttl,
    absl::Duration timeout, absl::AnyInvocable<void(absl::Status) &&> cb) {
  return SendExtend(ExtendOrReacquireScript(), resource, token, ttl, timeout,
                    std::move(cb));
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
