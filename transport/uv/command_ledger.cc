// CommandLedger: see command_ledger.h.
#include "dlock/transport/uv/command_ledger.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {

CommandLedger::CommandLedger(uv_loop_s* loop, EventLoop* timers, const std::string* endpoint)
    : endpoint_(endpoint),
      events_(timers, [this](Event&& e) { Deliver(std::move(e)); }),
      deadlines_(loop, [this](DeadlineNode* node) {
        bool gone = false;
        bool* const outer = gone_;
        gone_ = &gone;
        OnDeadline(static_cast<CommandRequest*>(node));
        if (gone) {
          if (outer != nullptr) *outer = true;
          return false;
        }
        gone_ = outer;
        return true;
      }) {}

CommandLedger::~CommandLedger() {
  if (gone_ != nullptr) *gone_ = true;
}

std::unique_ptr<CommandRequest> CommandLedger::Start(ReplyCallback callback,
                                                     absl::Duration timeout) {
  auto r = std::make_unique<CommandRequest>();
  r->callback = std::move(callback);
  ++pending_;
  deadlines_.Add(r.get(), timeout);
  return r;
}

void CommandLedger::Wait(std::unique_ptr<CommandRequest> r,
                         absl::Span<const absl::string_view> argv,
                         std::vector<std::string>* owned) {
  if (owned != nullptr) {
    r->argv = std::move(*owned);
  } else {
    r->argv.reserve(argv.size());
    for (absl::string_view a : argv) r->argv.emplace_back(a);
  }
  waiting_.push_back(std::move(r));
}

void CommandLedger::WaitTransaction(
    std::unique_ptr<CommandRequest> r,
    absl::Span<const absl::Span<const absl::string_view>> commands) {
  for (absl::Span<const absl::string_view> c : commands) {
    r->tx_sizes.push_back(c.size());
    for (absl::string_view a : c) r->argv.emplace_back(a);
  }
  waiting_.push_back(std::move(r));
}

void CommandLedger::Answer(std::unique_ptr<CommandRequest> r,
                           absl::StatusOr<Reply> reply) {
  if (r->done) return;  // its deadline passed: drop the late reply
  // Answered: the deadline no longer applies.
  deadlines_.Remove(r.get());
  r->result = std::move(reply);
  ready_.push_back(std::move(r));
}

void CommandLedger::DeliverReplies() {
  if (ready_.empty()) return;
  bool gone = false;
  bool* const outer = gone_;
  gone_ = &gone;
  while (!ready_.empty()) {
    std::unique_ptr<CommandRequest> r = ready_.pop_front();
    r->done = true;
    --pending_;
    // The callback may send (its reply comes on a later read), close or
    // destroy the transport; `r` no longer refers to it.
    std::move(r->callback)(std::move(r->result));
    if (gone) {
      if (outer != nullptr) *outer = true;
      return;
    }
  }
  gone_ = outer;
}

void CommandLedger::Complete(std::unique_ptr<CommandRequest> r,
                             absl::StatusOr<Reply> result) {
  if (r->done) return;
  // The outcome is known: it is delivered even if the deadline passes
  // before the next loop turn.
  deadlines_.Remove(r.get());
  r->result = std::move(result);
  Event e;
  e.request = std::move(r);
  events_.Push(std::move(e));
}

void CommandLedger::FailWaiting(const absl::Status& why) {
  RequestQueue waiting;
  TakeWaiting(&waiting);
  while (!waiting.empty()) Complete(waiting.pop_front(), why);
}

void CommandLedger::Defer(Notice notice) {
  Event e;
  e.notice = std::move(notice);
  events_.Push(std::move(e));
}

void CommandLedger::OnDeadline(CommandRequest* request) {
  if (request->done) return;
  request->done = true;
  --pending_;
  // The request stays where it is (waiting queue or reply FIFO) so that the
  // reply order stays right; its late reply is dropped.
  ReplyCallback cb = std::move(request->callback);
  std::move(cb)(absl::DeadlineExceededError(
      absl::StrCat(*endpoint_, ": no reply before the command's deadline")));
  // `this` may be gone now.
}

void CommandLedger::Deliver(Event&& e) {
  if (e.request != nullptr) {
    CommandRequest& r = *e.request;
    if (r.done) return;
    r.done = true;
    --pending_;
    ReplyCallback cb = std::move(r.callback);
    std::move(cb)(std::move(r.result));
  } else if (e.notice) {
    std::move(e.notice)(false);
  }
}

void CommandLedger::TakeOwed(Owed* owed) {
  const absl::Status cancelled = absl::CancelledError("transport closed");
  auto owe_request = [&](std::unique_ptr<CommandRequest> r) {
    deadlines_.Remove(r.get());
    if (r->done) return;
    r->done = true;
    --pending_;
    owed->push_back([cb = std::move(r->callback), cancelled]() mutable {
      std::move(cb)(cancelled);
    });
  };
  while (!ready_.empty()) owe_request(ready_.pop_front());
  std::deque<Event> events = events_.TakeAll();
  for (Event& e : events) {
    if (e.request != nullptr) {
      owe_request(std::move(e.request));
    } else if (e.notice) {
      owed->push_back([n = std::move(e.notice)]() mutable { std::move(n)(true); });
    }
  }
  while (!waiting_.empty()) owe_request(waiting_.pop_front());
  // Every request is gone now; the timer handle is freed by libuv's close
  // callback (so the host can uv_loop_close after one more loop run).
  deadlines_.Close();
}

}  // namespace dlock
