#include "dlock/transport/uv/sentinel_master.h"

#include <utility>

#include "absl/strings/match.h"
#include "dlock/transport/uv/sentinel_options.h"

namespace dlock {

SentinelMaster::SentinelMaster(EventLoop* loop, absl::AnyInvocable<void()> on_suspect)
    : loop_(loop), on_suspect_(std::move(on_suspect)) {}

SentinelMaster::~SentinelMaster() {
  if (graveyard_timer_ != 0) loop_->Cancel(graveyard_timer_);
}

std::string SentinelMaster::address() const {
  return master_ == nullptr ? "" : SentinelHostPort(host_, port_);
}

void SentinelMaster::Replace(std::unique_ptr<Transport> next, std::string host, int port) {
  ++generation_;
  std::unique_ptr<Transport> old = std::move(master_);
  master_ = std::move(next);
  host_ = std::move(host);
  port_ = port;
  for (uint64_t id : subs_.Ids()) subs_.Place(id, master_.get(), "").IgnoreError();
  // Its commands in flight fail with kUnavailable (see Send).
  Bury(std::move(old));
}

void SentinelMaster::Drop() {
  // Demoted: never send it another write.
  ++generation_;
  std::unique_ptr<Transport> old = std::move(master_);
  host_.clear();
  port_ = 0;
  subs_.DetachAll();
  Bury(std::move(old));
}

void SentinelMaster::Bury(std::unique_ptr<Transport> transport) {
  if (transport == nullptr) return;
  std::weak_ptr<int> life = life_;
  transport->Close();
  if (life.expired()) return;
  graveyard_.push_back(std::move(transport));
  if (graveyard_timer_ == 0) {
    graveyard_timer_ = loop_->RunAfter(absl::ZeroDuration(), [this] {
      graveyard_timer_ = 0;
      graveyard_.clear();
    });
  }
}

absl::Status SentinelMaster::Send(std::vector<std::string> argv, absl::Duration timeout,
                                  ReplyCallback callback) {
  return master_->Send(std::move(argv), timeout, Wrap(std::move(callback)));
}

absl::Status SentinelMaster::SendScript(absl::string_view body,
                                        absl::Span<const absl::string_view> evalsha_argv,
                                        absl::Duration timeout, ReplyCallback callback) {
  return master_->SendScript(body, evalsha_argv, timeout, Wrap(std::move(callback)));
}

absl::Status SentinelMaster::SendTransaction(
    absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout,
    ReplyCallback callback) {
  return master_->SendTransaction(commands, timeout, Wrap(std::move(callback)));
}

ReplyCallback SentinelMaster::Wrap(ReplyCallback callback) {
  const uint64_t generation = generation_;
  return [this, life = std::weak_ptr<int>(life_), generation,
          callback = std::move(callback)](absl::StatusOr<Reply> reply) mutable {
    if (!life.expired() && !closed_) {
      if (generation != generation_) {
        // Never re-sent: a lock script run again on the new master is
        // not the same outcome.
        reply = absl::UnavailableError(
            "Sentinel: the master changed while this command was in flight "
            "(it may or may not have run on the old master)");
      } else if ((reply.ok() && reply->is_error() &&
                  absl::StartsWith(reply->str, "READONLY")) ||
                 (!reply.ok() && absl::IsUnavailable(reply.status()))) {
        on_suspect_();  // a replica answered, or the connection was lost
      }
    }
    std::move(callback)(std::move(reply));
  };
}

std::unique_ptr<Subscription> SentinelMaster::Subscribe(
    std::string channel, MessageCallback on_message,
    SubscriptionRelay::ReadyCallback on_ready) {
  uint64_t id = 0;
  std::unique_ptr<Subscription> handle =
      subs_.Add(std::move(channel), std::move(on_message), std::move(on_ready), &id);
  if (master_ != nullptr) subs_.Place(id, master_.get(), "").IgnoreError();
  return handle;
}

uint64_t SentinelMaster::connection_epoch() const {
  if (closed_ || master_ == nullptr) return 0;
  const uint64_t inner = master_->connection_epoch();
  if (inner == 0) return 0;
  return (generation_ << 32) | (inner & 0xffffffffu);
}

void SentinelMaster::Stop() {
  closed_ = true;
  if (graveyard_timer_ != 0) loop_->Cancel(graveyard_timer_);
  graveyard_timer_ = 0;
}

void SentinelMaster::CloseMaster() {
  if (master_ != nullptr) master_->Close();
}

void SentinelMaster::CloseBuried() {
  for (auto& g : graveyard_) g->Close();
}

}  // namespace dlock
