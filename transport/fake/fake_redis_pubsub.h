// Internal to //transport/fake: FakeRedis's pub/sub. Not a public API.
//
// `PubSubHub` is the pub/sub state: the client sessions, which channels
// each subscribes to, and the delivery of a PUBLISH to them (in session-id
// order, so tests are deterministic). `PubSubCommands` is the command
// family PUBLISH, SUBSCRIBE, UNSUBSCRIBE; it and FakeRedisSession go
// through the hub.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_session.h"

namespace dlock {
namespace fake_redis_internal {

class PubSubHub {
 public:
  using Session = FakeRedisSession;

  PubSubHub() = default;
  PubSubHub(const PubSubHub&) = delete;
  PubSubHub& operator=(const PubSubHub&) = delete;

  // A new client connection whose commands run on `commands`.
  std::unique_ptr<Session> NewSession(CommandTable* commands);
  // The session is going away: forgets it and its subscriptions.
  void DropSession(Session* s);
  // The server is going away: sessions left stop pointing at it.
  void DetachSessions();

  void Subscribe(Session* s, const std::string& channel);
  void Unsubscribe(Session* s, const std::string& channel);
  // Delivers `message` to every subscriber of `channel` (its handler, else
  // its queue); returns how many there were. A handler may unsubscribe or
  // destroy sessions.
  int64_t Publish(const std::string& channel, const std::string& message);
  size_t SubscriberCount(const std::string& channel) const;
  // The channels `s` subscribes to, sorted.
  std::vector<std::string> ChannelsOf(const Session& s) const;

  // A server restart: every session loses its subscriptions, then each
  // still alive gets its restart handler called (it may destroy sessions).
  void Restart();

 private:
  // channel -> subscribed sessions (ordered by id for deterministic delivery)
  std::map<std::string, std::map<uint64_t, Session*>> channels_;
  std::map<uint64_t, Session*> sessions_;
  uint64_t next_session_id_ = 1;
};

// PUBLISH, SUBSCRIBE and UNSUBSCRIBE.
class PubSubCommands {
 public:
  // `hub` must outlive the family.
  explicit PubSubCommands(PubSubHub* hub) : hub_(hub) {}
  void Register(CommandTable* table);

 private:
  Reply Publish(const Args& argv);
  Reply Subscribe(CallContext& ctx, const Args& argv);
  Reply Unsubscribe(CallContext& ctx, const Args& argv);

  PubSubHub* hub_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_
