// This header defines `FakeTransport`: one client connection to an
// in-memory `FakeRedis`, implementing `Transport` with the same contract as
// the real `HiredisTransport`, plus fault injection and a record of what
// was sent. Several transports may share one server, to simulate several
// processes (or RedLock's N servers with N servers).
//
//   ManualEventLoop loop;
//   FakeRedis server(&loop);
//   FakeTransport conn(&loop, &server);
//   conn.Send({"SET", "k", "v", "PX", "100"}, absl::Seconds(1), callback);
//   loop.RunUntilIdle();  // the command is applied and the callback runs
//
// Timing model. A command sent at time t is applied on the server at
// t + request_latency (never before an earlier command of this connection)
// and its reply reaches the callback request + reply latency after the
// send, in send order. With zero latency, both happen on the next loop
// turn: never inside Send. A command is atomic on the server: nothing else
// runs between the redis.call()s of a script.
//
// Scripts (SendScript) keep command order as a real connection does
// (transport.h): the connection keeps the SHA-1s loaded on it (forgotten on
// every new connection: a server restart, Partition()); a script not yet
// loaded goes out as `SCRIPT LOAD body` + `EVALSHA`, back to back (both in
// sent(); the pair takes ONE fate from the fault plan: FailNext(1) fails
// the script, not just its load). A NOSCRIPT reply (the cache was flushed
// under the connection: SCRIPT FLUSH on the server) forgets every SHA-1;
// the script is sent again (load + EVALSHA), once, if nothing was sent
// after it on this connection, else the callback gets kUnavailable
// (kScriptCacheFlushedMessage) -- never a re-send behind later commands.
//
// Transactions (SendTransaction) go out as `MULTI`, the commands, `EXEC`,
// each in sent() (CountSent("MULTI") counts them), and are applied on the
// server together, in one loop task (the server also runs EXEC atomically:
// fake_redis_session.h); the group takes ONE fate from the fault plan
// (FailNext(1) fails the whole transaction, DropNextReplies(1) loses EXEC's
// reply after it ran). The callback gets EXEC's reply.
//
// Outcomes (the callback runs exactly once, on the loop, never inside Send):
//   - the Reply (an error reply like "NOSCRIPT ..." is a Reply of type kError);
//   - kDeadlineExceeded at send + timeout when no reply came by then (the
//     command may still be applied later, as on a real network);
//   - kUnavailable when the connection is partitioned, or was partitioned
//     or the server restarted while the command was pending (a command not
//     yet applied then is never applied);
//   - kCancelled from Close() (synchronously inside Close, like the real one).
// Send rejects (returns non-OK, callback never runs): empty argv or a
// non-positive timeout (kInvalidArgument); SUBSCRIBE, PSUBSCRIBE,
// UNSUBSCRIBE, PUNSUBSCRIBE, MONITOR (kInvalidArgument: use Subscribe);
// anything after Close() (kCancelled).
//
// Pub/sub: Subscribe uses a second server session (as the real transport
// uses a second connection). The channel is subscribed on the server after
// the request latency; `on_ready` gets OK after the reply latency, or
// kUnavailable while partitioned, or kCancelled from Close(). A message is
// delivered after the reply latency to every subscription active on the
// server when it was published. The subscription stays registered until
// its handle is destroyed: after Heal() or a server restart its channel is
// subscribed again at once; messages published meanwhile are lost.
//
// Faults (per connection; they never change the server):
//   SetLatency(rtt) / SetLatency(request, reply)  delay every later command
//   DropNextRequests(n)   the next n commands never reach the server; their
//                         callbacks get kDeadlineExceeded at the deadline
//   DropNextReplies(n)    the next n commands are applied but their replies
//                         are lost: kDeadlineExceeded at the deadline
//   FailNext(n, status)   the next n commands are not applied and complete
//                         with `status` after the round trip
//   FailNextWithReply(n, reply)  same, with a server reply (e.g. an error)
//   Partition() / Heal()  while partitioned every command fails with
//                         kUnavailable and no message is delivered
//   SetSubscribeDelay(d)  a slow pub/sub connection: each later Subscribe's
//                         SUBSCRIBE reaches the server `d` after the request
//                         latency, so its confirmation (on_ready) comes that
//                         much later too, and messages published before it
//                         arrived are not delivered (as on a real server)
// Server-wide faults (restart, clock jump, eviction) are on `FakeRedis`.
//
// Lifetime: `loop` and `server` must outlive the transport. The transport
// may be destroyed inside any of its own callbacks; Subscription handles may
// outlive it. Works on any EventLoop (ManualEventLoop, UvEventLoop).
//
// Not thread-safe: call only on the thread running `loop`.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_TRANSPORT_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/fake_command_queue.h"
#include "dlock/transport/fake/fake_fault_plan.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_script_sender.h"
#include "dlock/transport/fake/fake_sent_log.h"
#include "dlock/transport/fake/fake_subscriptions.h"
#include "dlock/transport/fake/tracked_tasks.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {

class FakeTransport : public Transport {
 public:
  FakeTransport(EventLoop* loop, FakeRedis* server);
  // Runs Close().
  ~FakeTransport() override;

  FakeTransport(const FakeTransport&) = delete;
  FakeTransport& operator=(const FakeTransport&) = delete;

  // Transport (see the header comment).
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // See "Scripts" above. Copies what it keeps.
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  // See "Transactions" above.
  absl::Status SendTransaction(absl::Span<const absl::Span<const absl::string_view>> commands,
                               absl::Duration timeout, ReplyCallback callback) override;
  // kInvalidArgument for a null on_message, kCancelled after Close().
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  // 1 at first; a new value after every server restart and every
  // Partition() (the connection is re-made, as a real client reconnects);
  // 0 while partitioned or closed.
  uint64_t connection_epoch() const override {
    return closed_ || partitioned() ? 0 : epoch_;
  }

  // Like HiredisTransport::Connect: `callback` runs on a later loop turn
  // with OK, or kUnavailable while partitioned, or kCancelled from Close().
  // Returns kCancelled after Close() (the callback then never runs).
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;

  // Fails every pending command, Connect waiter and unconfirmed on_ready
  // with kCancelled, synchronously, and disconnects from the server. No
  // callback runs after it returns. Idempotent.
  void Close() override;

  bool connected() const override { return !closed_ && !partitioned(); }
  bool closed() const { return closed_; }
  // Commands sent and not yet answered, failed or timed out.
  size_t pending_commands() const override { return commands_.size(); }

  // ---- Faults -------------------------------------------------------------

  // Round-trip latency of later commands: applied after rtt/2, answered
  // after rtt. Negative values count as zero.
  void SetLatency(absl::Duration round_trip);
  void SetLatency(absl::Duration request, absl::Duration reply);
  void DropNextRequests(int n);
  void DropNextReplies(int n);
  void FailNext(int n, absl::Status status);
  void FailNextWithReply(int n, Reply reply);
  void Partition();
  void Heal();
  // See "Faults" above. Negative values count as zero.
  void SetSubscribeDelay(absl::Duration delay);
  bool partitioned() const { return faults_.partitioned(); }

  // ---- Observation --------------------------------------------------------

  // Every command accepted by Send, in order (whatever its fate). At most
  // kMaxSentLog entries are kept; past it the oldest half is discarded.
  static constexpr size_t kMaxSentLog = FakeSentLog::kMaxSentLog;
  const std::vector<std::vector<std::string>>& sent() const { return sent_.sent(); }
  // How many accepted commands are named `command` (case-insensitive).
  int64_t CountSent(absl::string_view command) const { return sent_.CountSent(command); }
  // How many accepted EVALSHA/EVAL commands run the script with this SHA-1.
  int64_t CountScriptRuns(absl::string_view sha1) const { return sent_.CountScriptRuns(sha1); }
  void ClearSent() { sent_.Clear(); }
  // The id of this connection's command session in `FakeRedis::log()`.
  uint64_t session_id() const { return session_id_; }

  FakeRedis* server() const { return server_; }
  EventLoop* loop() const { return loop_; }

 private:
  void Log(std::vector<std::string> argv) { sent_.Log(std::move(argv)); }

  EventLoop* loop_;
  FakeRedis* server_;
  // The pieces, each with one job (see their headers): the faults to
  // inject, every loop task (so Close cancels them all), the commands in
  // flight, pub/sub, the record of what was sent, and scripts (scripts_,
  // last: it works on the others).
  FakeFaultPlan faults_;
  TrackedTasks tasks_;
  std::unique_ptr<FakeRedis::Session> cmd_session_;
  uint64_t session_id_ = 0;
  FakeCommandQueue commands_;
  FakeSubscriptions subscriptions_;

  bool closed_ = false;
  uint64_t epoch_ = 1;
  // Commands sent on this connection (Send and SendScript).
  uint64_t sent_serial_ = 0;

  uint64_t next_waiter_ = 1;
  std::map<uint64_t, absl::AnyInvocable<void(absl::Status) &&>> connect_waiters_;

  FakeSentLog sent_;
  FakeScriptSender scripts_{
      {loop_, &commands_, &faults_, &sent_, &epoch_, &closed_, &sent_serial_}};
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_TRANSPORT_H_
