// This header defines `FakeRedisSession`, also named `FakeRedis::Session`:
// one client connection to a `FakeRedis` (fake_redis.h) and its
// server-side state, its pub/sub subscriptions. Include fake_redis.h and
// get one from `FakeRedis::NewSession()`.
//
// Lifetime: destroy it before the server. If the server goes first, the
// session is detached: `Command` answers an error and the rest does nothing.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SESSION_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {
class CommandTable;  // fake_redis_commands.h
class PubSubHub;     // fake_redis_pubsub.h
}  // namespace fake_redis_internal

class FakeRedisSession {
 public:
  ~FakeRedisSession();
  FakeRedisSession(const FakeRedisSession&) = delete;
  FakeRedisSession& operator=(const FakeRedisSession&) = delete;

  // Runs one command as this client and returns every reply the server
  // sends for it: exactly one, except SUBSCRIBE/UNSUBSCRIBE, which answer
  // once per channel, like Redis. While subscribed, only (UN)SUBSCRIBE
  // and PING are accepted (RESP2 rules). Execution is synchronous.
  //
  // Transactions as Redis runs them: MULTI (+OK) starts queuing; each
  // later command is checked (unknown command, arity) and queued
  // (+QUEUED), or refused with its error, which makes EXEC answer
  // EXECABORT; EXEC runs the queued commands back to back -- nothing of
  // another session runs between them -- and answers the array of their
  // replies; DISCARD drops the queue. MULTI inside MULTI, and EXEC or
  // DISCARD without MULTI, are errors. WATCH is not modelled.
  std::vector<Reply> Command(std::vector<std::string> argv);

  // Called for each message published on a channel this session is
  // subscribed to, synchronously inside PUBLISH (also inside a script), so
  // it must not call back into the server (FakeTransport's handler only
  // schedules the delivery). Without a handler, messages are queued for
  // `TakeMessages()`.
  void SetMessageHandler(
      std::function<void(const std::string& channel, const std::string& message)> handler);
  // Queued messages as Redis pushes them: ["message", channel, payload].
  std::vector<Reply> TakeMessages();

  // Called once when the server restarts (the connection is dropped; the
  // session has lost its subscriptions by then).
  void SetRestartHandler(std::function<void()> handler);

  // Subscribes without going through the protocol (no replies).
  void SubscribeDirect(const std::string& channel);
  void UnsubscribeDirect(const std::string& channel);
  size_t subscription_count() const { return channels_.size(); }
  uint64_t id() const { return id_; }

 private:
  // The hub creates sessions, delivers to them and detaches them.
  friend class fake_redis_internal::PubSubHub;
  FakeRedisSession(fake_redis_internal::CommandTable* commands,
                   fake_redis_internal::PubSubHub* hub, uint64_t id)
      : commands_(commands), hub_(hub), id_(id) {}

  // Both null once the server is gone.
  fake_redis_internal::CommandTable* commands_;
  fake_redis_internal::PubSubHub* hub_;
  uint64_t id_;
  std::set<std::string> channels_;
  std::function<void(const std::string&, const std::string&)> on_message_;
  std::function<void()> on_restart_;
  std::vector<Reply> queued_;
  // MULTI state (see Command).
  bool in_multi_ = false;
  bool multi_dirty_ = false;
  std::vector<std::vector<std::string>> multi_queue_;

  // Command for MULTI, EXEC, DISCARD and commands queued under MULTI;
  // nullopt for a command that runs at once.
  std::optional<std::vector<Reply>> Transaction(std::vector<std::string>& argv);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SESSION_H_
