// Internal to //transport/uv: `CommandLedger`, the command side that
// HiredisTransport and TlsTransport share -- every accepted command from
// Send to its one callback: its deadline (command_deadlines.h), the queue of
// commands waiting for a connection, answered commands delivered right after
// the read that brought them (same loop turn, outside every hiredis
// callback), failures delivered on a later loop turn (deferred_queue.h),
// and what Close owes. Which commands are on the wire, in which order, is
// the connection's (reconnecting_connection.h).
//
// Exactly once: a request's callback runs from DeliverReplies (answered),
// from the deferred queue (failed), from its deadline (kDeadlineExceeded;
// the request stays queued, marked done, so that later replies still match
// their commands, and its late reply is dropped) or from what TakeOwed
// returns (Close). A callback may destroy the transport and with it the
// ledger: the loops delivering stop touching members then.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_COMMAND_LEDGER_H_
#define DLOCK_TRANSPORT_UV_COMMAND_LEDGER_H_

#include <cstddef>
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
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/command_deadlines.h"
#include "dlock/transport/uv/deferred_queue.h"

struct uv_loop_s;

namespace dlock {

// One command: its callback (the one heap allocation per command on the
// transport's side), its result once known, and its links into one
// RequestQueue and the deadline list.
struct CommandRequest : DeadlineNode {
  ReplyCallback callback;
  absl::StatusOr<Reply> result;   // set when answered
  std::vector<std::string> argv;  // kept only while waiting for a connection
  CommandRequest* next = nullptr; // RequestQueue link
  bool done = false;              // callback delivered (e.g. timed out)
  bool internal = false;          // AUTH / SELECT / PING of the handshake,
                                  // or a SCRIPT LOAD (script_load)
  const char* internal_name = "";
  // A script command (Transport::SendScript): its EVALSHA argv and body,
  // owned by the caller until the callback has run or been destroyed, so
  // read only while !done. Empty for any other command.
  absl::Span<const absl::string_view> script_argv;
  absl::string_view script_body;
  bool script_resent = false;  // re-sent once after a NOSCRIPT already
  bool script_load = false;    // internal: the SCRIPT LOAD before an EVALSHA
  // Internal: the replies of a transaction's MULTI and queued commands
  // (+OK, +QUEUED or a queuing error), read and dropped; its EXEC is the
  // caller's request right behind.
  size_t tx_skip = 0;
  // A transaction waiting for a connection: `argv` holds its commands one
  // after another, these their sizes (empty for any other command).
  std::vector<size_t> tx_sizes;
};

// A FIFO of owned requests linked through CommandRequest::next (no
// allocation per entry).
class RequestQueue {
 public:
  RequestQueue() = default;
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;
  ~RequestQueue() {
    while (!empty()) pop_front();
  }
  bool empty() const { return head_ == nullptr; }
  void push_back(std::unique_ptr<CommandRequest> r) {
    CommandRequest* raw = r.release();
    raw->next = nullptr;
    if (tail_ == nullptr) {
      head_ = tail_ = raw;
    } else {
      tail_->next = raw;
      tail_ = raw;
    }
  }
  CommandRequest* front() const { return head_; }
  std::unique_ptr<CommandRequest> pop_front() {
    CommandRequest* r = head_;
    if (r == nullptr) return nullptr;
    head_ = r->next;
    if (head_ == nullptr) tail_ = nullptr;
    r->next = nullptr;
    return std::unique_ptr<CommandRequest>(r);
  }
  void swap(RequestQueue& other) {
    std::swap(head_, other.head_);
    std::swap(tail_, other.tail_);
  }

 private:
  CommandRequest* head_ = nullptr;
  CommandRequest* tail_ = nullptr;
};

class CommandLedger {
 public:
  // A deferred notification, told whether Close is cancelling it.
  using Notice = absl::AnyInvocable<void(bool cancelled) &&>;
  using Owed = std::vector<absl::AnyInvocable<void() &&>>;

  // `loop` runs the deadline timer, `timers` the deferred queue; both, and
  // `endpoint` (named in deadline errors), must outlive the ledger.
  CommandLedger(uv_loop_s* loop, EventLoop* timers, const std::string* endpoint);
  CommandLedger(const CommandLedger&) = delete;
  CommandLedger& operator=(const CommandLedger&) = delete;
  ~CommandLedger();

  // A new request for `callback`, counted as pending, expiring `timeout`
  // from now.
  std::unique_ptr<CommandRequest> Start(ReplyCallback callback, absl::Duration timeout);
  // Queues `r` until a connection is ready, keeping its argv (moved from
  // `owned` when given, else copied from `argv`).
  void Wait(std::unique_ptr<CommandRequest> r, absl::Span<const absl::string_view> argv,
            std::vector<std::string>* owned);
  // Takes the waiting queue (into an empty `out`).
  void TakeWaiting(RequestQueue* out) { out->swap(waiting_); }
  // The connection attempt failed: every waiting request fails with `why`
  // (on a later turn, as Complete).
  void FailWaiting(const absl::Status& why);

  // `r` got `reply` (or a failure decided on reading its reply): delivered
  // by DeliverReplies, in order with the other replies (dropped if `r` is
  // done).
  void Answer(std::unique_ptr<CommandRequest> r, absl::StatusOr<Reply> reply);
  // Queues `r` until a connection is ready: WaitTransaction when `tx` is
  // set, else WaitScript for a script request, else Wait.
  void Hold(std::unique_ptr<CommandRequest> r, absl::Span<const absl::string_view> argv,
            std::vector<std::string>* owned,
            const absl::Span<const absl::Span<const absl::string_view>>* tx) {
    if (tx != nullptr) {
      WaitTransaction(std::move(r), *tx);
    } else if (!r->script_argv.empty()) {
      WaitScript(std::move(r));
    } else {
      Wait(std::move(r), argv, owned);
    }
  }
  // Queues a transaction `r` until a connection is ready, keeping a copy of
  // its commands (CommandRequest::argv and tx_sizes).
  void WaitTransaction(std::unique_ptr<CommandRequest> r,
                       absl::Span<const absl::Span<const absl::string_view>> commands);
  // Queues a script request `r` until a connection is ready, keeping no
  // copy: its argv is the caller's (CommandRequest::script_argv).
  void WaitScript(std::unique_ptr<CommandRequest> r) { waiting_.push_back(std::move(r)); }
  // `r` failed (or was answered without a read): delivered on a later turn.
  void Complete(std::unique_ptr<CommandRequest> r, absl::StatusOr<Reply> result);
  // Runs `notice` on a later loop turn, in order with the failures.
  void Defer(Notice notice);
  // Delivers the answered requests (call once the read has returned).
  void DeliverReplies();

  // Commands accepted and not yet called back.
  size_t pending() const { return pending_; }

  // Close: moves every callback still owed into `owed`, in order (answered
  // requests, deferred ones, waiting ones), cancelled, and closes the
  // deadline timer. Nothing is delivered by the ledger afterwards.
  void TakeOwed(Owed* owed);

 private:
  struct Event {
    std::unique_ptr<CommandRequest> request;
    Notice notice;
  };
  void Deliver(Event&& event);
  void OnDeadline(CommandRequest* request);

  const std::string* const endpoint_;
  RequestQueue waiting_;  // commands waiting for the connection
  RequestQueue ready_;    // answered, delivered by DeliverReplies
  DeferredQueue<Event> events_;
  // Per-command deadlines: one libuv timer for all (command_deadlines.h).
  CommandDeadlines deadlines_;
  size_t pending_ = 0;
  // Set while a loop delivering user callbacks runs; the destructor sets
  // *gone_ so that loop stops touching members.
  bool* gone_ = nullptr;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_COMMAND_LEDGER_H_
