#include "dlock/lock/fair_commands.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dlock/lock/fair_scripts.h"
#include "dlock/lock/lease_command.h"
#include "dlock/lock/lease_rules.h"
#include "dlock/lock/reply_status.h"
#include "dlock/transport/reply.h"

namespace dlock {

FairCommands::FairCommands(Transport* transport, KeyScheme keys)
    : transport_(transport), keys_(std::move(keys)) {
  // A cluster keeps one data-set marker per slot (see keys.h).
  if (transport_ != nullptr && transport_->cluster()) keys_.per_slot_data_set = true;
}

std::string FairCommands::QueueKey(absl::string_view resource) const {
  return absl::StrCat(keys_.LockKey(resource), ":queue");
}

std::string FairCommands::WaiterChannel(absl::string_view instance) const {
  return absl::StrCat(keys_.prefix, "waiter:", instance);
}

namespace {

// {'queued', position, waiters} -> FairAcquireReply; nullopt otherwise.
std::optional<FairAcquireReply> QueuedReply(const Reply& reply) {
  if (!reply.is_array() || reply.elements.size() != 3) return std::nullopt;
  const Reply& tag = reply.elements[0];
  if (!tag.is_string() || tag.str != "queued") return std::nullopt;
  if (!reply.elements[1].is_integer() || !reply.elements[2].is_integer()) {
    return std::nullopt;
  }
  FairAcquireReply r;
  r.position = reply.elements[1].integer;
  r.waiters = reply.elements[2].integer;
  return r;
}

// The fair acquire's reply: queued, or as the plain acquire's (the fence,
// a refusal, an error).
struct FairReply {
  using Output = absl::StatusOr<FairAcquireReply>;
  Output operator()(absl::StatusOr<Reply> reply,
                    absl::Span<const absl::string_view> keys) const {
    if (reply.ok()) {
      if (std::optional<FairAcquireReply> q = QueuedReply(*reply)) return *q;
    }
    // KEYS: lock, data-set, queue, fence mark.
    FenceReply parse;
    parse.slots = AcquireKeySlots{0, 3, 1};
    absl::StatusOr<int64_t> fence = parse(std::move(reply), keys);
    if (!fence.ok()) return fence.status();
    FairAcquireReply r;
    r.fence = *fence;
    return r;
  }
  WroteRule wrote() const { return WroteRule::Never(); }  // never acknowledged
};

}  // namespace

absl::Status FairCommands::Acquire(
    absl::string_view resource, absl::string_view token, absl::string_view waiter,
    absl::Duration ttl, absl::Duration restart_window, absl::Duration queue_ttl,
    absl::Duration timeout,
    absl::AnyInvocable<void(absl::StatusOr<FairAcquireReply>) &&> cb) {
  absl::Status s = ValidateAcquireArgs(resource, token, ttl, restart_window, timeout);
  if (!s.ok()) return s;
  if (queue_ttl < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("queue ttl must be >= 1 ms");
  }
  const std::string keys[] = {keys_.LockKey(resource), keys_.DataSetKey(resource),
                              QueueKey(resource), keys_.FenceHwmKey(resource)};
  const std::string args[] = {std::string(token), absl::StrCat(TtlMillis(ttl)),
                              absl::StrCat(absl::ToInt64Milliseconds(restart_window)),
                              std::string(waiter),
                              absl::StrCat(absl::ToInt64Milliseconds(queue_ttl)),
                              WaiterChannel("")};
  const absl::string_view key_views[] = {keys[0], keys[1], keys[2], keys[3]};
  const absl::string_view arg_views[] = {args[0], args[1], args[2],
                                         args[3], args[4], args[5]};
  return MakeLeaseCommand(FairAcquireScript(), key_views, arg_views, FairReply{})
      .Send(*transport_, timeout, std::move(cb));
}

absl::Status FairCommands::Release(
    absl::string_view resource, absl::string_view token, absl::string_view waiter,
    absl::Duration timeout,
    absl::AnyInvocable<void(absl::StatusOr<ReleaseNotice>) &&> cb) {
  absl::Status s = ValidateCommandArgs(resource, token, timeout);
  if (!s.ok()) return s;
  const std::string keys[] = {keys_.LockKey(resource), QueueKey(resource)};
  const std::string channel = WaiterChannel("");
  const absl::string_view key_views[] = {keys[0], keys[1]};
  const absl::string_view arg_views[] = {token, waiter, channel};
  return MakeLeaseCommand(FairReleaseScript(), key_views, arg_views, ReleaseNoticeReply{})
      .Send(*transport_, timeout, std::move(cb));
}

}  // namespace dlock
