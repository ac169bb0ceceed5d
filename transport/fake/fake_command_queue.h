// Internal to //transport/fake:fake_transport. This header defines
// `FakeCommandQueue`: the commands of one FakeTransport connection in
// flight on the loop's (virtual) clock. A command is applied on the server
// after the request latency, never before an earlier command of the
// connection; its outcome reaches the callback after the reply latency, in
// send order; with no outcome by its deadline, the callback gets
// kDeadlineExceeded (the command may still be applied later). Which
// commands are applied, dropped or failed is the fault plan's decision,
// carried out by Dispatch() for every command of the connection (plain and
// script alike); the latencies are read from the plan when used.
//
// Every callback runs exactly once, on the loop (never inside a call of
// this class), or is handed back by TakeAll(). A callback may destroy the
// queue's owner.
//
// Not thread-safe: call only on the thread running the loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_COMMAND_QUEUE_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_COMMAND_QUEUE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/fake/fake_fault_plan.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/tracked_tasks.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {

class FakeCommandQueue {
 public:
  // `tasks`, `faults` and `session` must outlive the queue, or at least
  // every task it scheduled (TrackedTasks::CancelAll ends those).
  FakeCommandQueue(TrackedTasks* tasks, FakeFaultPlan* faults,
                   FakeRedis::Session* session)
      : tasks_(tasks), faults_(faults), session_(session) {}
  FakeCommandQueue(const FakeCommandQueue&) = delete;
  FakeCommandQueue& operator=(const FakeCommandQueue&) = delete;

  // What a client does with the reply of a command whose callback already
  // got kDeadlineExceeded: a real client still reads it off the connection
  // (FakeTransport learns from a late NOSCRIPT that the cache was flushed).
  using LateReplyHook = absl::AnyInvocable<void(const Reply&) &&>;

  // Registers a command: `callback` gets kDeadlineExceeded `timeout` from
  // now unless an outcome comes first. Returns its id; then call one of
  // Apply or Answer, or neither (a dropped request). If the command timed
  // out and its reply still arrives (not dropped, connection not lost),
  // `on_late_reply` gets it when it would have been delivered.
  uint64_t Add(absl::Duration timeout, ReplyCallback callback,
               LateReplyHook on_late_reply = nullptr);
  // Gives command `id` (from Add) its fate under the fault plan -- THE
  // fault switch of the connection, for FakeTransport::Send and the script
  // sender alike: partitioned -> kUnavailable "FakeTransport: partitioned"
  // at once (no fault used up); otherwise FakeFaultPlan::TakeNext():
  // kFail -> fail_outcome() after the round trip; kDropRequest -> nothing
  // (only the deadline answers); kDropReply / kApply -> Apply(id, argv,
  // drop_reply, load_body). Returns whether the command reaches the server
  // (kDropReply or kApply): a script load in `load_body` then took effect.
  // `before` (a transaction: MULTI and the queued commands, `argv` being
  // EXEC) is applied right before `argv`, in the same loop task, its
  // replies read and dropped; the group takes this one fate.
  bool Dispatch(uint64_t id, std::vector<std::string> argv, std::string load_body = {},
                std::vector<std::vector<std::string>> before = {});
  // Applies `argv` on the server after the request latency (in order);
  // the reply is delivered after the reply latency unless `drop_reply`.
  // With a `load_body`, `SCRIPT LOAD load_body` is applied right before
  // `argv` (an EVALSHA; pipelined, as FakeTransport::SendScript writes
  // them); if the load is refused, its error reply stands for the
  // EVALSHA's NOSCRIPT.
  void Apply(uint64_t id, std::vector<std::string> argv, bool drop_reply,
             std::string load_body = {}, std::vector<std::vector<std::string>> before = {});
  // Delivers `outcome` to command `id` `delay` from now (no earlier than
  // any outcome scheduled before it), replacing one already scheduled.
  void Answer(uint64_t id, absl::StatusOr<Reply> outcome, absl::Duration delay);
  // The connection was lost: commands not applied yet never will be, and
  // every pending command gets `why` on the next loop turn.
  void DropInFlight(const absl::Status& why);
  // Forgets every command and returns their callbacks in send order (for
  // Close; the caller cancels the tasks with TrackedTasks::CancelAll).
  std::vector<ReplyCallback> TakeAll();

  // Commands sent and not yet answered, failed or timed out.
  size_t size() const { return requests_.size(); }

 private:
  struct Pending {
    ReplyCallback callback;
    uint64_t timeout_task = 0;
    uint64_t deliver_task = 0;
  };

  void RunApply(uint64_t id, std::vector<std::string> argv, bool drop_reply,
                std::string load_body, std::vector<std::vector<std::string>> before);
  // `timed_out`: the deadline's kDeadlineExceeded (the late hook stays).
  void Complete(uint64_t id, absl::StatusOr<Reply> outcome, bool timed_out = false);

  TrackedTasks* const tasks_;
  FakeFaultPlan* const faults_;
  FakeRedis::Session* const session_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> requests_;
  std::map<uint64_t, uint64_t> unapplied_;  // request id -> apply task
  std::map<uint64_t, LateReplyHook> late_;   // request id -> its late hook
  absl::Time last_apply_at_ = absl::InfinitePast();
  absl::Time last_deliver_at_ = absl::InfinitePast();
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_COMMAND_QUEUE_H_
