#include "dlock/transport/uv/sentinel_waiters.h"

#include <utility>

namespace dlock {

SentinelWaiters::SentinelWaiters(
    EventLoop* loop, absl::AnyInvocable<absl::Status(absl::Duration timeout)> timeout_status)
    : timeout_status_(std::move(timeout_status)), held_(loop) {}

void SentinelWaiters::HoldCommand(std::vector<std::string> argv, absl::Duration timeout,
                                  ReplyCallback callback) {
  held_.Hold(Waiting{std::move(argv), timeout, std::move(callback)}, timeout,
             [this](Waiting w) {
               const absl::Status why = timeout_status_(w.timeout);
               std::move(w.callback)(why);
             });
}

void SentinelWaiters::SendAll(Transport& transport) {
  std::weak_ptr<int> life = life_;
  for (Waiting& w : held_.TakeAll()) {
    // Held here too: a refused Send destroys the callback it was given.
    auto holder = std::make_shared<ReplyCallback>(std::move(w.callback));
    absl::Status s = transport.Send(std::move(w.argv), w.timeout,
                                    [holder](absl::StatusOr<Reply> reply) {
                                      std::move(*holder)(std::move(reply));
                                    });
    if (!s.ok() && *holder) {
      std::move(*holder)(s);
      if (life.expired()) return;
    }
  }
}

void SentinelWaiters::FailCommands(const absl::Status& why) {
  std::weak_ptr<int> life = life_;
  for (Waiting& w : held_.TakeAll()) {
    std::move(w.callback)(why);
    if (life.expired()) return;
  }
}

void SentinelWaiters::FireConnect(const absl::Status& status) {
  std::vector<ConnectCallback> waiters;
  waiters.swap(connect_);
  std::weak_ptr<int> life = life_;
  for (auto& w : waiters) {
    std::move(w)(status);
    if (life.expired()) return;
  }
}

}  // namespace dlock
