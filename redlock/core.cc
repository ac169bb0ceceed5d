#include "dlock/redlock/core.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"

namespace dlock {
namespace redlock_internal {
namespace {

constexpr absl::Duration kMinAutoServerTimeout = absl::Milliseconds(1);
constexpr absl::Duration kMaxAutoServerTimeout = absl::Milliseconds(50);
constexpr absl::Duration kMinAutoReleaseTimeout = absl::Seconds(1);

}  // namespace

Core::Core(EventLoop* loop, RedLockOptions options, int quorum,
           const std::vector<Transport*>& transports)
    : loop_(loop),
      options_(std::move(options)),
      quorum_(quorum),
      observer_(ObserverOrNoop(options_.observer)),
      run_ids_(std::make_shared<RunIdTracker>(loop, options_, transports)),
      rng_(options_.jitter_seed != 0 ? options_.jitter_seed
                                     : absl::Uniform<uint64_t>(absl::BitGen())),
      released_(kRememberedReleases) {
  // NewToken()'s 32 hex characters fit without a reallocation later.
  for (Released& r : released_) r.token.reserve(32);
  servers_.resize(transports.size());
  for (size_t i = 0; i < transports.size(); ++i) {
    servers_[i].transport = transports[i];
    servers_[i].commands = std::make_unique<LockCommands>(transports[i], options_.keys);
    if (!options_.server_names.empty()) servers_[i].name = options_.server_names[i];
  }
}

absl::Duration Core::Drift(absl::Duration ttl) const {
  return DriftAllowance(ttl, options_.drift_factor, kDefaultDriftConstant);
}

absl::Duration Core::Timeout(absl::Duration ttl) const {
  if (options_.server_timeout > absl::ZeroDuration()) return options_.server_timeout;
  if (ttl <= absl::ZeroDuration()) return kMaxAutoServerTimeout;
  return std::max(kMinAutoServerTimeout, std::min(ttl / 10, kMaxAutoServerTimeout));
}

absl::Duration Core::ReleaseTimeout(absl::Duration ttl) const {
  if (options_.release_timeout > absl::ZeroDuration()) return options_.release_timeout;
  return std::max(Timeout(ttl), kMinAutoReleaseTimeout);
}

absl::Duration Core::RetryDelay() {
  int64_t delay = absl::ToInt64Nanoseconds(options_.retry_delay);
  int64_t jitter = absl::ToInt64Nanoseconds(options_.retry_jitter);
  if (jitter > 0) {
    delay += std::uniform_int_distribution<int64_t>(-jitter, jitter)(rng_);
  }
  return absl::Nanoseconds(std::max<int64_t>(delay, 0));
}

void Core::ReportVote(absl::string_view resource, absl::string_view operation,
                      size_t i, const absl::Status& status, absl::Duration latency) {
  ServerVoteEvent event;
  event.resource = resource;
  event.operation = operation;
  event.server = static_cast<int>(i);
  event.server_name = servers_[i].name;
  event.status = status;
  event.latency = latency;
  observer_->OnServerVote(event);
}

void Core::ReportLateGrant(absl::string_view resource, absl::string_view operation,
                           absl::string_view reason, size_t i) {
  LateGrantEvent event;
  event.policy = kPolicy;
  event.resource = resource;
  event.operation = operation;
  event.reason = reason;
  event.server = static_cast<int>(i);
  event.server_name = servers_[i].name;
  observer_->OnLateGrant(event);
}

void Core::Unwatch(GrantWatch* watch) {
  auto it = std::find(watches_.begin(), watches_.end(), watch);
  if (it == watches_.end()) return;
  *it = watches_.back();
  watches_.pop_back();
}

void Core::NoteReleased(absl::string_view token, absl::Duration ttl) {
  for (GrantWatch* w : watches_) {
    if (w->token == token) w->released = true;
  }
  Released& r = released_[next_released_];
  next_released_ = (next_released_ + 1) % released_.size();
  r.token.assign(token.data(), token.size());
  r.forget_at = loop_->Now() + ttl;
}

bool Core::WasReleased(absl::string_view token) const {
  const absl::Time now = loop_->Now();
  for (const Released& r : released_) {
    if (now < r.forget_at && r.token == token) return true;
  }
  return false;
}

void Core::Register(std::shared_ptr<Op> op) {
  Op* key = op.get();
  active_.emplace(key, std::move(op));
}

void Core::Shutdown() {
  observer_ = NoopLockObserver();
  absl::flat_hash_map<Op*, std::shared_ptr<Op>> ops;
  ops.swap(active_);
  for (auto& entry : ops) entry.second->Shutdown();
}

}  // namespace redlock_internal
}  // namespace dlock
