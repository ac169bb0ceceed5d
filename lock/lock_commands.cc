#include "dlock/lock/lock_commands.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/lock/replica_ack_options.h"
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

void LockCommands::PrepareLeaseArgv(absl::string_view resource, absl::string_view token,
                                    absl::Duration ttl, LeaseArgv& a) const {
  a.resource_keys.emplace(keys_.prefix, resource);
  const char* ttl_end = absl::numbers_internal::FastIntToBuffer(TtlMillis(ttl), a.ttl_ms);
  a.args[0] = token;
  a.args[1] = absl::string_view(a.ttl_ms, static_cast<size_t>(ttl_end - a.ttl_ms));
}

LeaseCommand<FenceReply> LockCommands::AcquireCommand(absl::string_view resource,
                                                      absl::string_view token,
                                                      absl::Duration ttl,
                                                      absl::Duration restart_window,
                                                      LeaseArgv& a, bool fencing) const {
  PrepareLeaseArgv(resource, token, ttl, a);
  a.keys[0] = a.resource_keys->lock();
  if (keys_.per_slot_data_set) {
    a.data_set_key = keys_.DataSetKey(resource);
    if (fencing) a.fence_hwm_key = keys_.FenceHwmKey(resource);
    a.keys[1] = a.data_set_key;
    a.keys[2] = a.fence_hwm_key;
  } else {
    a.keys[1] = data_set_key_;
    a.keys[2] = fence_hwm_key_;
  }
  const char* window_end = absl::numbers_internal::FastIntToBuffer(
      absl::ToInt64Milliseconds(restart_window), a.window_ms);
  a.args[2] = absl::string_view(a.window_ms, static_cast<size_t>(window_end - a.window_ms));
  if (!fencing) {
    // KEYS: lock, and the marker only when the window is on (the script
    // reads it only then). A grant is 0.
    const size_t num_keys = restart_window > absl::ZeroDuration() ? 2 : 1;
    FenceReply granted_as_zero;
    granted_as_zero.min_fence = 0;
    if (num_keys == 1 && ack_.min_replicas == 0) {
      // Nothing to decide on the server but SET NX: the plain command, no
      // script (what is lost: a string with no TTL under the lock key reads
      // as held, not as foreign data -- docs/fences.md).
      granted_as_zero.set_get = true;
      return LeaseCommand<FenceReply>{nullptr, {a.keys, 1}, {a.args, 2}, granted_as_zero, ack_};
    }
    return MakeLeaseCommand(AcquireUnfencedScript(), {a.keys, num_keys}, {a.args, 3},
                            granted_as_zero, ack_);
  }
  LeaseCommand<FenceReply> acquire =
      MakeLeaseCommand(AcquireScript(), {a.keys, 3}, {a.args, 3}, FenceReply{}, ack_);
  // The common path as one MULTI/EXEC, no script (lease_command.h:
  // SendFencedAcquireTx); with replica acknowledgement the script stays.
  if (ack_.min_replicas == 0) acquire.after_tx = &AcquireAfterTxScript();
  return acquire;
}

LeaseCommand<ReleaseNoticeReply> LockCommands::ReleaseCommand(absl::string_view resource,
                                                              absl::string_view token,
                                                              LeaseArgv& a) const {
  a.resource_keys.emplace(keys_.prefix, resource);
  a.keys[0] = a.resource_keys->lock();
  a.args[0] = token;
  a.args[1] = a.resource_keys->channel();
  return MakeLeaseCommand(ReleaseScript(), {a.keys, 1}, {a.args, 2}, ReleaseNoticeReply{});
}

LeaseCommand<OwnedReply> LockCommands::ExtendCommand(absl::string_view resource,
                                                     absl::string_view token,
                                                     absl::Duration ttl, LeaseArgv& a) const {
  PrepareLeaseArgv(resource, token, ttl, a);
  a.keys[0] = a.resource_keys->lock();
  return MakeLeaseCommand(ExtendScript(), {a.keys, 1}, {a.args, 2}, OwnedReply{"extend"}, ack_);
}

LeaseCommand<OwnedReply> LockCommands::ExtendOrReacquireCommand(absl::string_view resource,
                                                                absl::string_view token,
                                                                absl::Duration ttl,
                                                                LeaseArgv& a) const {
  PrepareLeaseArgv(resource, token, ttl, a);
  a.keys[0] = a.resource_keys->lock();
  return MakeLeaseCommand(ExtendOrReacquireScript(), {a.keys, 1}, {a.args, 2},
                          OwnedReply{"extend"});
}

absl::Status LockCommands::Extend(absl::string_view resource, absl::string_view token,
                                  absl::Duration ttl, absl::Duration timeout,
                                  absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommandArgs(resource, token, ttl, timeout);
  if (!s.ok()) return s;
  LeaseArgv a;
  return ExtendCommand(resource, token, ttl, a).Send(*transport_, timeout, std::move(cb));
}

absl::Status LockCommands::ExtendOrReacquire(
    absl::string_view resource, absl::string_view token, absl::Duration ttl,
    absl::Duration timeout, absl::AnyInvocable<void(absl::Status) &&> cb) {
  absl::Status s = ValidateCommandArgs(resource, token, ttl, timeout);
  if (!s.ok()) return s;
  LeaseArgv a;
  return ExtendOrReacquireCommand(resource, token, ttl, a)
      .Send(*transport_, timeout, std::move(cb));
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
