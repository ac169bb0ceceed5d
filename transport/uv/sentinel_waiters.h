// This header defines `SentinelWaiters`: what waits for a SentinelTransport
// (sentinel_transport.h) to have a master -- the commands sent while none
// is known (held in send order, so a script and the WAIT behind it stay in
// order, each bounded by its own timeout) and the Connect callbacks.
//
// Not thread-safe: call only on the loop's thread; the loop must outlive it.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_WAITERS_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_WAITERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/held_commands.h"

namespace dlock {

class SentinelWaiters {
 public:
  using ConnectCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // `timeout_status(timeout)` is what a command whose `timeout` passed
  // while held gets (kDeadlineExceeded naming why there is no master).
  SentinelWaiters(EventLoop* loop,
                  absl::AnyInvocable<absl::Status(absl::Duration timeout)> timeout_status);
  SentinelWaiters(const SentinelWaiters&) = delete;
  SentinelWaiters& operator=(const SentinelWaiters&) = delete;

  void HoldCommand(std::vector<std::string> argv, absl::Duration timeout,
                   ReplyCallback callback);
  void AddConnect(ConnectCallback callback) { connect_.push_back(std::move(callback)); }
  size_t commands() const { return held_.size(); }

  // The calls below run user callbacks, which may destroy this (and its
  // owner): each stops at once when that happens.

  // Sends every held command through `transport`, in the order held, with
  // its full timeout; a command it refuses gets the refusal.
  void SendAll(Transport& transport);
  // Fails every held command with `why`.
  void FailCommands(const absl::Status& why);
  // Runs every Connect callback with `status`.
  void FireConnect(const absl::Status& status);

 private:
  struct Waiting {
    std::vector<std::string> argv;
    absl::Duration timeout;
    ReplyCallback callback;
  };

  absl::AnyInvocable<absl::Status(absl::Duration)> timeout_status_;
  HeldCommands<Waiting> held_;
  std::vector<ConnectCallback> connect_;
  // Expires when this is destroyed.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_WAITERS_H_
