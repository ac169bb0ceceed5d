// This header defines `SentinelMaster`, the master side of a
// SentinelTransport (sentinel_transport.h): the connection to the master
// discovery confirmed, and what is bound to it.
//
//   - Commands go out on it; the reply of a command sent before the master
//     changed (or was dropped) becomes kUnavailable ("the master changed
//     ..."): it may or may not have run on the old master, and it is never
//     re-sent -- a lock script run again elsewhere is not the same outcome.
//     A READONLY reply (we reached a replica) or a kUnavailable failure
//     (connection lost) calls `on_suspect` (start a rediscovery).
//   - The subscriptions follow the master: placed on each new one.
//   - A replaced connection is closed at once (its commands in flight fail
//     as above) and destroyed on a later turn, never inside its own
//     callbacks.
//
// Not thread-safe: call only on the loop's thread; the loop must outlive it.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_MASTER_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_MASTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/subscription_relay.h"

namespace dlock {

class SentinelMaster {
 public:
  SentinelMaster(EventLoop* loop, absl::AnyInvocable<void()> on_suspect);
  SentinelMaster(const SentinelMaster&) = delete;
  SentinelMaster& operator=(const SentinelMaster&) = delete;
  ~SentinelMaster();

  // The master connection (null while none is confirmed).
  Transport* get() const { return master_.get(); }
  bool Is(const std::string& host, int port) const {
    return master_ != nullptr && host == host_ && port == port_;
  }
  // "host:port" of the master ("" if none).
  std::string address() const;
  // How many times the master was replaced or dropped.
  uint64_t generation() const { return generation_; }

  // Makes `next` (at host:port) the master and moves every subscription to
  // it; the old connection, if any, is closed (its commands in flight fail)
  // and destroyed later. May run user callbacks and so destroy the owner.
  void Replace(std::unique_ptr<Transport> next, std::string host, int port);
  // Drops the master (it was demoted): as Replace, with no new master.
  void Drop();
  // Closes `transport` now and destroys it on a later turn (or with this).
  // Closing may run user callbacks and so destroy the owner.
  void Bury(std::unique_ptr<Transport> transport);

  // Sends on the master (which must be set); see above.
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback);
  // Transport::SendScript on the master (which must be set), with Send's
  // reply rules. Each master connection loads its scripts itself (a new
  // master's connection knows none), so order holds after a switch too.
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback);
  // Transport::SendTransaction on the master (which must be set), with
  // Send's reply rules.
  absl::Status SendTransaction(absl::Span<const absl::Span<const absl::string_view>> commands,
                               absl::Duration timeout, ReplyCallback callback);
  // Registers a subscription and places it on the master, if any.
  std::unique_ptr<Subscription> Subscribe(std::string channel, MessageCallback on_message,
                                          SubscriptionRelay::ReadyCallback on_ready);
  SubscriptionRelay& subscriptions() { return subs_; }

  // See Transport::connection_epoch: a new value for every master and for
  // every connection to it; 0 while none is connected.
  uint64_t connection_epoch() const;

  // Closing starts: replies pass through unchanged, no more suspicion
  // notices, no more deferred destruction.
  void Stop();
  // Closes the master connection (may run user callbacks) and the replaced
  // connections still waiting to be destroyed.
  void CloseMaster();
  void CloseBuried();

 private:
  EventLoop* const loop_;
  absl::AnyInvocable<void()> on_suspect_;
  bool closed_ = false;
  std::unique_ptr<Transport> master_;
  std::string host_;
  int port_ = 0;
  uint64_t generation_ = 0;
  // Replaced connections, destroyed on a later turn.
  std::vector<std::unique_ptr<Transport>> graveyard_;
  TimerId graveyard_timer_ = 0;
  // Declared after master_, so its subscriptions go first.
  SubscriptionRelay subs_;
  // Wraps `callback` with Send's reply rules (see above).
  ReplyCallback Wrap(ReplyCallback callback);

  // Expires when this is destroyed; callbacks check it.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_MASTER_H_
