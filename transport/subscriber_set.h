// Internal to the transports: `SubscriberSet`, the subscriber side of
// pub/sub that HiredisTransport, TlsTransport and FakeTransport share: who
// subscribed to which channel with which callbacks, the `Subscription`
// handles they got, and the two delicate calls (on_ready runs at most once; on_message may
// destroy its own subscription or the transport). What goes over the wire
// (SUBSCRIBE/UNSUBSCRIBE, confirmations, reconnects) stays each
// transport's.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_SUBSCRIBER_SET_H_
#define DLOCK_TRANSPORT_SUBSCRIBER_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "dlock/transport/transport.h"

namespace dlock {

class SubscriberSet {
 public:
  using ReadyCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // `unsubscribe(id)` runs when the handle of subscriber `id` is destroyed
  // while this set exists; the owner then forgets the subscriber (Remove)
  // and perhaps its channel.
  explicit SubscriberSet(absl::AnyInvocable<void(uint64_t id)> unsubscribe)
      : unsubscribe_(std::move(unsubscribe)) {}
  SubscriberSet(const SubscriberSet&) = delete;
  SubscriberSet& operator=(const SubscriberSet&) = delete;
  // Detaches every handle: destroying one afterwards does nothing.
  ~SubscriberSet();

  // Registers a subscriber of `channel`; sets *id and returns its handle.
  std::unique_ptr<Subscription> Add(std::string channel, MessageCallback on_message,
                                    ReadyCallback on_ready, uint64_t* id);
  // Forgets subscriber `id` and detaches its handle (destroying the handle
  // afterwards does nothing); returns its channel, nullopt if unknown.
  std::optional<std::string> Remove(uint64_t id);

  bool empty() const { return subscribers_.empty(); }
  // Whether subscriber `id` exists and its on_ready has not run.
  bool AwaitsReady(uint64_t id) const;
  // The subscribers whose on_ready has not run.
  std::vector<uint64_t> AwaitingReady() const;
  // Takes subscriber `id`'s on_ready (empty if unknown or already taken).
  ReadyCallback TakeReady(uint64_t id);
  // Takes every on_ready not yet run (Close owes each a kCancelled).
  std::vector<ReadyCallback> TakeAllReady();

  // Calls subscriber `id`'s on_message (nothing if it is gone). The
  // callback may destroy its own subscription, or the owner and with it
  // this set; either way nothing is touched afterwards. Returns false when
  // this set was destroyed inside (the caller must then touch nothing of
  // the owner either), true otherwise.
  bool DeliverMessage(uint64_t id, absl::string_view channel,
                      absl::string_view message);

 private:
  class Handle;
  struct Subscriber {
    std::string channel;
    MessageCallback on_message;
    ReadyCallback on_ready;  // empty once taken
    Handle* handle = nullptr;
  };

  absl::AnyInvocable<void(uint64_t)> unsubscribe_;
  absl::flat_hash_map<uint64_t, Subscriber> subscribers_;
  uint64_t next_id_ = 1;
  // Expires when the set is destroyed (inside a message callback).
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_SUBSCRIBER_SET_H_
