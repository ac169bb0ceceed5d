#include "dlock/lock/lock_commands.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/scripts.h"
#include "dlock/transport/reply.h"

namespace dlock {

LockCommands::LockCommands(Transport* transport, KeyScheme keys)
    : transport_(transport), keys_(std::move(keys)) {
  // A cluster keeps one data-set marker per slot (see keys.h).
  if (transport_ != nullptr && transport_->cluster()) keys_.per_slot_data_set = true;
  data_set_key_ = keys_.DataSetKey();
  fence_hwm_key_ = keys_.FenceHwmKey();
}

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
                                          const absl::StatusOr<Reply>& reply,
                                          int64_t min_fence, absl::string_view held) {
  if (!reply.ok()) return reply.status();
  std::optional<absl::Status> refusal = AcquireRefusalStatus(keys, resource, *reply);
  if (refusal.has_value()) return *std::move(refusal);
  if (reply->is_nil()) return absl::AbortedError(held);
  if (reply->is_integer() && reply->integer >= min_fence) return reply->integer;
  return UnexpectedReplyStatus("acquire", *reply);
}

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

absl::Status LockCommands::PrepareAcquire(absl::string_view resource,
                                          absl::string_view token, absl::Duration ttl,
                                          absl::Duration restart_window,
                                          absl::Duration timeout, AcquireArgv& a) const {
  absl::Status s = ValidateAcquireArgs(resource, token, ttl, restart_window, timeout);
  if (!s.ok()) return s;
  const ResourceKeys& k = a.resource_keys.emplace(keys_.prefix, resource);
  a.keys[0] = k.lock();
  if (keys_.per_slot_data_set) {
    a.data_set_key = keys_.DataSetKey(resource);
    a.fence_hwm_key = keys_.FenceHwmKey(resource);
    a.keys[1] = a.data_set_key;
    a.keys[2] = a.fence_hwm_key;
  } else {
    a.keys[1] = data_set_key_;
    a.keys[2] = fence_hwm_key_;
  }
  const char* ttl_end = absl::numbers_internal::FastIntToBuffer(TtlMillis(ttl), a.ttl_ms);
  const char* window_end = absl::numbers_internal::FastIntToBuffer(
      absl::ToInt64Milliseconds(restart_window), a.window_ms);
  a.args[0] = token;
  a.args[1] = absl::string_view(a.ttl_ms, static_cast<size_t>(ttl_end - a.ttl_ms));
  a.args[2] = absl::string_view(a.window_ms, static_cast<size_t>(window_end - a.window_ms));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LockCommands::AcquireReplyFence(
    absl::StatusOr<Reply> reply, absl::Span<const absl::string_view> keys) {
  if (!reply.ok()) return reply.status();
  std::optional<absl::Status> refusal =
      AcquireRefusalStatus(keys[0], keys[2], keys[1], *reply);
  if (refusal.has_value()) return *std::move(refusal);
  if (reply->is_nil()) return absl::AbortedError("lock is held by another owner");
  if (reply->is_integer() && reply->integer >= 1) return reply->integer;
  return UnexpectedReplyStatus("acquire", *reply);
}

absl::Status LockCommands::SendExtend(const Script& script, absl::string_view resource,
                                      absl::string_view token, absl::Duration ttl,
                                      absl::Duration timeout,
                                      absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommandArgs(resource, token, ttl, timeout);
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
  if (ack_.min_replicas > 0) {
    // Acknowledged: WAIT goes right behind the script (replica_ack.h).
    absl::Status s = ValidateCommandArgs(resource, token, ttl, timeout);
    if (!s.ok()) return s;
    return RunAcknowledged(
        ExtendScript(), *transport_, {keys_.LockKey(resource)},
        {std::string(token), absl::StrCat(TtlMillis(ttl))}, timeout, ack_,
        [](const Reply& r) { return r.is_integer() && r.integer == 1; },
        [cb = std::move(cb)](absl::StatusOr<Reply> reply) mutable {
          std::move(cb)(OwnedReplyStatus("extend", reply));
        });
  }
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
