#include "dlock/lock/lease_command.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

#include "dlock/lock/error_text.h"
#include "dlock/lock/reply_status.h"

namespace dlock {

std::optional<absl::Status> AcquireNonGrant(const absl::StatusOr<Reply>& reply,
                                            absl::Span<const absl::string_view> keys,
                                            AcquireKeySlots slots, absl::string_view held) {
  if (!reply.ok()) return reply.status();
  if (reply->is_array()) {
    // A slot the script was not given (the unfenced acquire names no mark,
    // nor the marker with the window off) reads as an empty name.
    auto key = [keys](size_t slot) {
      return slot < keys.size() ? keys[slot] : absl::string_view();
    };
    std::optional<absl::Status> refusal = AcquireRefusalStatus(
        key(slots.lock), key(slots.fence), key(slots.data_set), *reply);
    if (refusal.has_value()) return refusal;
  }
  if (reply->is_nil()) return absl::AbortedError(held);
  return std::nullopt;
}

absl::StatusOr<int64_t> FenceReply::operator()(
    absl::StatusOr<Reply> reply, absl::Span<const absl::string_view> keys) const {
  if (set_get && reply.ok()) {
    // SET NX GET answers the old value: nil when it set the key.
    if (reply->is_nil()) return 0;
    if (reply->is_string()) return absl::AbortedError(held);
    if (reply->is_error() && absl::StartsWith(reply->str, "WRONGTYPE")) {
      // Another type under the lock key: the scripts' foreign refusal
      // (the plain command cannot tell which type).
      std::vector<Reply> foreign;
      foreign.push_back(Reply::String("foreign"));
      foreign.push_back(Reply::String("not a string"));
      foreign.push_back(Reply::Integer(0));
      std::optional<absl::Status> refusal =
          AcquireRefusalStatus(keys.empty() ? absl::string_view() : keys[0], absl::string_view(),
                               absl::string_view(), Reply::Array(std::move(foreign)));
      if (refusal.has_value()) return *std::move(refusal);
    }
    return UnexpectedReplyStatus("acquire", *reply);
  }
  std::optional<absl::Status> not_granted = AcquireNonGrant(reply, keys, slots, held);
  if (not_granted.has_value()) return *std::move(not_granted);
  if (reply->is_integer() && reply->integer >= min_fence) return reply->integer;
  return UnexpectedReplyStatus("acquire", *reply);
}

absl::Status OwnedReply::operator()(absl::StatusOr<Reply> reply,
                                    absl::Span<const absl::string_view>) const {
  if (!reply.ok()) return reply.status();
  if (reply->is_integer() && reply->integer == 1) return absl::OkStatus();
  if (reply->is_integer() && reply->integer == 0) {
    if (!lost.empty()) return absl::FailedPreconditionError(lost);
    return ErrorStatus(absl::StatusCode::kFailedPrecondition,
                       "%: the lease no longer owns the key", {what});
  }
  return UnexpectedReplyStatus(what, *reply);
}

absl::StatusOr<ReleaseNotice> ReleaseNoticeReply::operator()(
    absl::StatusOr<Reply> reply, absl::Span<const absl::string_view>) const {
  if (reply.ok() && reply->is_string()) {
    // Deleted; the PUBLISH was refused (see scripts.h).
    ReleaseNotice notice;
    notice.published = false;
    notice.publish_error = std::move(reply->str);
    return notice;
  }
  absl::Status status = OwnedReply{"release"}(std::move(reply), {});
  if (!status.ok()) return status;
  return ReleaseNotice();
}

absl::StatusOr<int64_t> AcquireReplyFence(const KeyScheme& keys, absl::string_view resource,
                                          const absl::StatusOr<Reply>& reply,
                                          int64_t min_fence, absl::string_view held) {
  const FenceReply parse{min_fence, held, AcquireKeySlots{}};
  // The keys are named only in a refusal (an array).
  if (!reply.ok() || !reply->is_array()) return parse(reply, {});
  const std::string lock = keys.LockKey(resource);
  const std::string data_set = keys.DataSetKey(resource);
  const std::string fence_mark = keys.FenceHwmKey(resource);
  const absl::string_view named[] = {lock, data_set, fence_mark};
  return parse(reply, named);
}

absl::StatusOr<ReleaseNotice> ReleaseReplyNotice(absl::StatusOr<Reply> reply) {
  return ReleaseNoticeReply{}(std::move(reply), {});
}

absl::Status OwnedReplyStatus(absl::string_view what, const absl::StatusOr<Reply>& reply) {
  return OwnedReply{what}(reply, {});
}

}  // namespace dlock
