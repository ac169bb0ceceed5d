// This header defines `SubscriptionRelay`: the subscriptions a transport
// over a changing topology (ClusterTransport, SentinelTransport) hands out.
// Each one lives on one node connection at a time and is moved by its owner
// when the topology changes (a slot's master is gone, a failover): the
// relay keeps the user's callbacks and the handle the user holds, and places
// them on whichever node the owner names.
//
//   - on_message is shared with every placement, so a message callback that
//     destroys its own subscription does not destroy the callable it runs in.
//   - on_ready runs at most once: from the first placement that answers, or
//     from the owner (a failure, Close) through Ready/TakeReady.
//   - Destroying the handle removes the record and its current placement;
//     after the relay is destroyed a handle does nothing.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_SUBSCRIPTION_RELAY_H_
#define DLOCK_TRANSPORT_UV_SUBSCRIPTION_RELAY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "dlock/transport/transport.h"

namespace dlock {

class SubscriptionRelay {
 public:
  using ReadyCallback = absl::AnyInvocable<void(absl::Status) &&>;

  struct Record {
    std::string channel;
    std::shared_ptr<MessageCallback> on_message;
    ReadyCallback on_ready;  // null once run or taken
    std::string node;        // where it was last placed ("" nowhere)
    std::unique_ptr<Subscription> inner;  // null while not placed
  };

  SubscriptionRelay() = default;
  SubscriptionRelay(const SubscriptionRelay&) = delete;
  SubscriptionRelay& operator=(const SubscriptionRelay&) = delete;

  // Registers a subscription (not placed yet). `*id` names it to the other
  // methods; the returned handle is what the transport's Subscribe returns.
  std::unique_ptr<Subscription> Add(std::string channel, MessageCallback on_message,
                                    ReadyCallback on_ready, uint64_t* id);

  // Drops record `id`'s placement, notes `address` as its node and
  // subscribes it on `node`. OK, or why not (kUnavailable when `node` is
  // null, else the node's refusal): the record is then not placed and its
  // on_ready has not run.
  absl::Status Place(uint64_t id, Transport* node, std::string address);

  // Runs `id`'s on_ready with `status` if it has not run yet. May destroy
  // the relay's owner.
  void Ready(uint64_t id, absl::Status status);
  // Takes `id`'s on_ready if it has not run yet (null otherwise).
  ReadyCallback TakeReady(uint64_t id);

  // Drops every placement (the records stay, unplaced).
  void DetachAll();
  // Drops every placement and takes every on_ready not yet run.
  std::vector<ReadyCallback> DetachAllAndTakeReady();

  // Ids of the records that are not placed and still wait for on_ready.
  std::vector<uint64_t> UnplacedWaiting() const;
  // Ids of every record.
  std::vector<uint64_t> Ids() const;
  const Record* Find(uint64_t id) const;
  // True when a record's node (placed or not) is `address`.
  bool Hosts(const std::string& address) const;

 private:
  class Handle;

  void Remove(uint64_t id);

  absl::flat_hash_map<uint64_t, std::unique_ptr<Record>> records_;
  uint64_t next_id_ = 1;
  // Expires when the relay is destroyed; handles and callbacks check it.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SUBSCRIPTION_RELAY_H_
