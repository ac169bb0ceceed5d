// Internal to //transport/uv: `PubSubChannels`, the channel side of pub/sub
// that HiredisTransport and TlsTransport share, over their pub/sub
// ReconnectingConnection: one SUBSCRIBE per channel however many
// subscribers it has (SubscriberSet keeps those), UNSUBSCRIBE when the last
// one goes, the server's confirmations and messages, every channel
// subscribed again after a reconnect, and each subscriber's on_ready: OK
// once the server confirmed its channel, kUnavailable when the connection
// failed or was lost first (or the server refused the SUBSCRIBE), never more
// than once. The connection is opened on the first Subscribe and left idle
// once no channel is left. See hiredis_transport.h for the contract.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_PUBSUB_CHANNELS_H_
#define DLOCK_TRANSPORT_UV_PUBSUB_CHANNELS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/command_ledger.h"
#include "dlock/transport/uv/reconnecting_connection.h"
#include "dlock/transport/subscriber_set.h"

namespace dlock {

class PubSubChannels {
 public:
  // `conn` (the pub/sub connection), `ledger` (for deferred callbacks) and
  // `endpoint` must outlive this.
  PubSubChannels(ReconnectingConnection* conn, CommandLedger* ledger,
                 const std::string* endpoint)
      : conn_(conn), ledger_(ledger), endpoint_(endpoint) {}
  PubSubChannels(const PubSubChannels&) = delete;
  PubSubChannels& operator=(const PubSubChannels&) = delete;

  // Transport::Subscribe once the arguments are checked (on_message set).
  std::unique_ptr<Subscription> Subscribe(std::string channel, MessageCallback on_message,
                                          SubscriberSet::ReadyCallback on_ready);

  // The connection became ready: subscribes every channel again.
  void OnReady();
  // The connection failed or was lost: fails the waiting on_ready with
  // `why`. Returns whether it should reconnect (some channel is left).
  bool OnDown(const absl::Status& why, bool was_ready);
  // A reply on the pub/sub connection: a confirmation, a message, an error.
  void OnPush(Reply reply);

  // Close: forgets every channel and returns the on_ready still owed.
  std::vector<SubscriberSet::ReadyCallback> Close();

 private:
  struct Channel {
    std::vector<uint64_t> subscribers;
    bool confirmed = false;   // the server confirmed on the current connection
    bool sub_sent = false;    // SUBSCRIBE sent, not yet confirmed
    bool unsub_sent = false;  // UNSUBSCRIBE sent, not yet confirmed
  };
  void SendSubscribe(const std::string& channel, bool subscribe);
  void Unsubscribe(uint64_t subscriber_id);
  // Runs subscriber `id`'s on_ready with `status` on a later turn.
  void FireReady(uint64_t id, absl::Status status);
  // Forgets what was sent on the old connection (and empty channels).
  void ResetChannels();

  ReconnectingConnection* const conn_;
  CommandLedger* const ledger_;
  const std::string* const endpoint_;
  bool closed_ = false;
  absl::flat_hash_map<std::string, std::unique_ptr<Channel>> channels_;
  // Channels whose SUBSCRIBE is unanswered, in order (a refusal is an error
  // reply without the channel's name).
  std::deque<std::string> sent_subscribes_;
  // Who subscribed with which callbacks (subscriber_set.h).
  SubscriberSet subscribers_{[this](uint64_t id) { Unsubscribe(id); }};
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_PUBSUB_CHANNELS_H_
