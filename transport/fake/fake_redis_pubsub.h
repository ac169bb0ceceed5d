// Internal to //transport/fake: `PubSubHub`, FakeRedis's pub/sub state: the
// client sessions, which channels each subscribes to, and the delivery of a
// PUBLISH to them (in session-id order, so tests are deterministic). The
// SUBSCRIBE/UNSUBSCRIBE/PUBLISH commands (fake_redis_pubsub_scripting.cc)
// and FakeRedis::Session go through it. Not a public API.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "dlock/transport/fake/fake_redis.h"

namespace dlock {
namespace fake_redis_internal {

class PubSubHub {
 public:
  using Session = FakeRedis::Session;

  PubSubHub() = default;
  PubSubHub(const PubSubHub&) = delete;
  PubSubHub& operator=(const PubSubHub&) = delete;

  // The id for the next session, then its registration.
  uint64_t NextSessionId() { return next_session_id_++; }
  void AddSession(Session* s) { sessions_[s->id_] = s; }
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

  // A server restart: every session loses its subscriptions, then each
  // still alive gets its restart handler called (it may destroy sessions).
  void Restart();

 private:
  // channel -> subscribed sessions (ordered by id for deterministic delivery)
  std::map<std::string, std::map<uint64_t, Session*>> channels_;
  std::map<uint64_t, Session*> sessions_;
  uint64_t next_session_id_ = 1;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_PUBSUB_H_
