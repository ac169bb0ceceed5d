// Internal to //transport/fake:fake_transport. This header defines
// `FakeSubscriptions`: the pub/sub side of one FakeTransport connection. It
// keeps a second server session (as the real transport keeps a second
// connection), subscribes each channel on the server after the request
// latency plus the subscribe delay, confirms with on_ready after the reply
// latency, delivers each message after the reply latency (in publish
// order) to every subscription active when it was published, and
// subscribes everything again after a heal or a server restart. Who
// subscribed with which callbacks is a `SubscriberSet`
// (//transport:subscriber_set), shared with the real transports.
//
// Latencies and the partition come from the transport's `FakeFaultPlan`.
// Subscription handles may outlive this object (they then do nothing).
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_SUBSCRIPTIONS_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_SUBSCRIPTIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/fake/fake_fault_plan.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/tracked_tasks.h"
#include "dlock/transport/subscriber_set.h"
#include "dlock/transport/transport.h"

namespace dlock {

class FakeSubscriptions {
 public:
  // `server`, `tasks` and `faults` must outlive this object.
  FakeSubscriptions(FakeRedis* server, TrackedTasks* tasks, const FakeFaultPlan* faults)
      : server_(server), tasks_(tasks), faults_(faults) {}
  FakeSubscriptions(const FakeSubscriptions&) = delete;
  FakeSubscriptions& operator=(const FakeSubscriptions&) = delete;

  // Subscribes `channel` (see the header comment). While partitioned,
  // `on_ready` gets kUnavailable on the next loop turn. `on_message` must
  // not be null.
  std::unique_ptr<Subscription> Add(std::string channel, MessageCallback on_message,
                                    SubscriberSet::ReadyCallback on_ready);
  // The connection is cut (call after the plan says partitioned): the
  // server forgets the channels, unconfirmed subscriptions get kUnavailable
  // on the next loop turn, and no message is delivered until Heal().
  void Partition();
  // The connection is back (the plan says so): every subscription is
  // subscribed again at once.
  void Heal();
  // Forgets every subscription and drops the server session. Returns the
  // on_ready callbacks still owed, in subscription order (Close owes each
  // a kCancelled). The caller cancels the tasks (TrackedTasks::CancelAll).
  std::vector<SubscriberSet::ReadyCallback> Close();

 private:
  // Per subscription, beside its callbacks in `set_`.
  struct State {
    std::string channel;
    uint64_t activate_task = 0;  // its SUBSCRIBE is on the way
    uint64_t ready_task = 0;     // on_ready is scheduled
    bool activating = false;
    bool active = false;  // subscribed on the server
  };

  void EnsureSession();
  void Activate(uint64_t id);
  void FireReady(uint64_t id, absl::Status status);
  void ScheduleUnavailable(uint64_t id, State& s);
  void Remove(uint64_t id);
  void ResubscribeAll();
  void OnMessage(const std::string& channel, const std::string& message);

  FakeRedis* const server_;
  TrackedTasks* const tasks_;
  const FakeFaultPlan* const faults_;
  std::unique_ptr<FakeRedis::Session> session_;
  SubscriberSet set_{[this](uint64_t id) { Remove(id); }};
  std::map<uint64_t, State> states_;  // ordered: messages go in subscription order
  absl::Time last_push_at_ = absl::InfinitePast();
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_SUBSCRIPTIONS_H_
