// This header defines `ConnectWaiters`, the callbacks of
// ReconnectingTransport::Connect still waiting to learn how the command
// connection's attempt ended. Each one runs exactly once: on a later loop
// turn, in order with the commands' failures (through the CommandLedger's
// deferred queue), with the attempt's outcome; or with kCancelled when the
// transport closes first.
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_TRANSPORT_UV_CONNECT_WAITERS_H_
#define DLOCK_TRANSPORT_UV_CONNECT_WAITERS_H_

#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "dlock/transport/uv/command_ledger.h"

namespace dlock {

class ConnectWaiters {
 public:
  using Callback = absl::AnyInvocable<void(absl::Status) &&>;

  // `ledger` must outlive this object.
  explicit ConnectWaiters(CommandLedger* ledger) : ledger_(ledger) {}
  ConnectWaiters(const ConnectWaiters&) = delete;
  ConnectWaiters& operator=(const ConnectWaiters&) = delete;

  void Add(Callback callback) { waiters_.push_back(std::move(callback)); }

  // Tells every waiter `status` (on a later turn; kCancelled instead if the
  // ledger is closed before then) and forgets them.
  void Notify(const absl::Status& status) {
    for (auto& cb : waiters_) {
      ledger_->Defer([cb = std::move(cb), status](bool cancelled) mutable {
        std::move(cb)(cancelled ? absl::CancelledError("transport closed") : status);
      });
    }
    waiters_.clear();
  }

  // Close: appends every waiter, bound to `cancelled`, to `owed` (run by
  // the caller, touching no member) and forgets them.
  void TakeCancelled(const absl::Status& cancelled, CommandLedger::Owed* owed) {
    for (auto& cb : waiters_) {
      owed->push_back([cb = std::move(cb), cancelled]() mutable { std::move(cb)(cancelled); });
    }
    waiters_.clear();
  }

 private:
  CommandLedger* const ledger_;
  std::vector<Callback> waiters_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_CONNECT_WAITERS_H_
