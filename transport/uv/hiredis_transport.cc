// HiredisTransport: creation, the command path (Send, the reply FIFO,
// delivery, what a passed deadline does), deferred events and Close. The
// connection state machine is in hiredis_connection.cc, pub/sub in
// hiredis_pubsub.cc, the libuv glue in hiredis_uv_glue.cc, the deadline
// list and its timer in command_deadlines.cc.
//
// Why a reply may be delivered without waiting for a later loop turn:
// hiredis calls a command's reply callback only from redisProcessCallbacks,
// which only redisAsyncHandleRead runs, which only the glue's poll callback
// runs; redisAsyncCommandArgv (inside Send) only formats the command into
// the output buffer and asks for writability. So no reply callback can run
// inside Send. The reply is not delivered inside hiredis's own callback
// either, but right after redisAsyncHandleRead returns (the glue's
// after_io hook, same loop turn): a user callback may close or destroy the
// transport, and hiredis 0.14 defers a redisAsyncFree called inside one of
// its callbacks until that callback returns, then runs the remaining reply
// callbacks with our (by then freed) Link as privdata.
#include "dlock/transport/uv/hiredis_transport.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <uv.h>

#include <memory>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/uv/hiredis_reply.h"
#include "hiredis_transport_internal.h"  // private, same directory
#include "hiredis_uv_glue.h"  // private, same directory

namespace dlock {
namespace {

bool IsForbiddenCommand(absl::string_view name) {
  // Fast path (every command passes here): all of them start with one of
  // these letters and are 7 to 12 bytes long.
  if (name.size() < 7 || name.size() > 12) return false;
  switch (name[0] | 0x20) {
    case 's': case 'p': case 'u': case 'm': break;
    default: return false;
  }
  for (const char* c : {"SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "MONITOR",
                        "SSUBSCRIBE", "SUNSUBSCRIBE"}) {
    if (absl::EqualsIgnoreCase(name, c)) return true;
  }
  return false;
}

void IgnoreSigpipeIfDefault() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Creation.

absl::Status ValidateSendArguments(size_t argc, absl::string_view command,
                                   absl::Duration timeout, bool has_callback) {
  if (argc == 0) return absl::InvalidArgumentError("empty command");
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  if (!has_callback) return absl::InvalidArgumentError("null callback");
  if (argc > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("too many arguments");
  }
  if (IsForbiddenCommand(command)) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, " changes the connection's protocol; use Subscribe"));
  }
  return absl::OkStatus();
}

absl::Status ValidateConnectionOptions(const HiredisTransportOptions& options) {
  if (options.unix_socket.empty()) {
    if (options.host.empty()) return absl::InvalidArgumentError("empty host");
    if (options.port < 1 || options.port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port ", options.port));
    }
  }
  if (!options.username.empty() && options.password.empty()) {
    return absl::InvalidArgumentError("username without password");
  }
  if (options.db < 0) return absl::InvalidArgumentError("negative db");
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("connect_timeout must be positive");
  }
  if (options.reconnect_backoff_min <= absl::ZeroDuration() ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return absl::InvalidArgumentError(
        "need 0 < reconnect_backoff_min <= reconnect_backoff_max");
  }
  if (!(options.reconnect_jitter >= 0 && options.reconnect_jitter <= 1)) {
    return absl::InvalidArgumentError("reconnect_jitter must be in [0, 1]");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HiredisTransport>> HiredisTransport::Create(
    uv_loop_s* loop, HiredisTransportOptions options) {
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (absl::Status s = ValidateConnectionOptions(options); !s.ok()) return s;
  IgnoreSigpipeIfDefault();
  auto t = std::unique_ptr<HiredisTransport>(
      new HiredisTransport(loop, std::move(options)));
  t->StartAttempt(*t->cmd_);
  return t;
}

HiredisTransport::HiredisTransport(uv_loop_s* loop, HiredisTransportOptions options)
    : loop_(loop),
      options_(std::move(options)),
      timers_(loop),
      cmd_(std::make_unique<Conn>(false)),
      sub_(std::make_unique<Conn>(true)),
      events_(&timers_, [this](Event&& e) { Deliver(std::move(e)); }),
      deadlines_(loop, [this](DeadlineNode* node) {
        bool gone = false;
        bool* const outer = gone_;
        gone_ = &gone;
        OnDeadline(static_cast<Request*>(node));
        if (gone) {
          if (outer != nullptr) *outer = true;
          return false;
        }
        gone_ = outer;
        return true;
      }) {}

HiredisTransport::~HiredisTransport() {
  if (gone_ != nullptr) *gone_ = true;
  Close();
}

bool HiredisTransport::connected() const {
  return cmd_->state == Conn::State::kReady;
}

uint64_t HiredisTransport::connection_epoch() const {
  return !closed_ && connected() ? cmd_epoch_ : 0;
}

absl::Status HiredisTransport::last_error() const { return cmd_->last_error; }

size_t HiredisTransport::pending_commands() const { return pending_; }

// ---------------------------------------------------------------------------
// Commands.

absl::Status HiredisTransport::Send(std::vector<std::string> argv,
                                    absl::Duration timeout, ReplyCallback callback) {
  absl::InlinedVector<absl::string_view, 16> views(argv.begin(), argv.end());
  return Submit(views, &argv, timeout, std::move(callback));
}

absl::Status HiredisTransport::SendArgv(absl::Span<const absl::string_view> argv,
                                        absl::Duration timeout, ReplyCallback callback) {
  return Submit(argv, nullptr, timeout, std::move(callback));
}

absl::Status HiredisTransport::Submit(absl::Span<const absl::string_view> argv,
                                      std::vector<std::string>* owned,
                                      absl::Duration timeout, ReplyCallback callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (absl::Status s = ValidateSendArguments(
          argv.size(), argv.empty() ? absl::string_view() : argv[0], timeout,
          callback != nullptr);
      !s.ok()) {
    return s;
  }
  auto r = std::make_unique<Request>();
  r->callback = std::move(callback);
  ++pending_;
  deadlines_.Add(r.get(), timeout);
  switch (cmd_->state) {
    case Conn::State::kReady:
      Issue(cmd_->link, std::move(r), argv);
      break;
    case Conn::State::kIdle:
    case Conn::State::kConnecting:
      if (owned != nullptr) {
        r->argv = std::move(*owned);
      } else {
        r->argv.reserve(argv.size());
        for (absl::string_view a : argv) r->argv.emplace_back(a);
      }
      waiting_.push_back(std::move(r));
      break;
    case Conn::State::kBackoff:
      Complete(std::move(r),
               absl::UnavailableError(absl::StrCat(
                   "not connected (retrying in the background); last error: ",
                   cmd_->last_error.message())));
      break;
  }
  return absl::OkStatus();
}

void HiredisTransport::Issue(Link* link, std::unique_ptr<Request> request,
                             const std::vector<std::string>& argv) {
  absl::InlinedVector<absl::string_view, 16> views(argv.begin(), argv.end());
  Issue(link, std::move(request), views);
}

void HiredisTransport::Issue(Link* link, std::unique_ptr<Request> request,
                             absl::Span<const absl::string_view> argv) {
  // hiredis takes pointer/length arrays; build them on the stack for the
  // usual short command (hiredis then formats the protocol once).
  constexpr size_t kInline = 16;
  const char* ptrs_inline[kInline];
  size_t lens_inline[kInline];
  std::unique_ptr<const char*[]> ptrs_heap;
  std::unique_ptr<size_t[]> lens_heap;
  const char** ptrs = ptrs_inline;
  size_t* lens = lens_inline;
  if (argv.size() > kInline) {
    ptrs_heap.reset(new const char*[argv.size()]);
    lens_heap.reset(new size_t[argv.size()]);
    ptrs = ptrs_heap.get();
    lens = lens_heap.get();
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    ptrs[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  int rc = redisAsyncCommandArgv(
      link->ac,
      [](redisAsyncContext*, void* reply, void* privdata) {
        Link* link = static_cast<Link*>(privdata);
        link->owner->OnReply(link, reply);
      },
      link, static_cast<int>(argv.size()), ptrs, lens);
  if (rc != REDIS_OK) {
    // Only when the context is already going away.
    if (!request->internal) {
      Complete(std::move(request),
               absl::UnavailableError(absl::StrCat(Endpoint(), ": connection closing")));
    }
    return;
  }
  link->fifo.push_back(std::move(request));
}

void HiredisTransport::OnReply(Link* link, void* raw_reply) {
  std::unique_ptr<Request> r = link->fifo.pop_front();
  if (r == nullptr) return;  // cannot happen: one entry per command
  const redisReply* reply = static_cast<const redisReply*>(raw_reply);
  if (r->internal) {
    if (reply == nullptr || link->tearing_down || link->handshake_failed) return;
    if (reply->type == REDIS_REPLY_ERROR) {
      link->handshake_failed = true;
      absl::Status why = absl::UnavailableError(
          absl::StrCat(Endpoint(), ": ", r->internal_name, " failed: ",
                       std::string(reply->str, reply->len)));
      // Free the context outside its own callback.
      Conn* c = link->conn;
      const uint64_t serial = link->serial;
      timers_.RunAfter(absl::ZeroDuration(), [this, c, serial, why] {
        if (c->link == nullptr || c->link->serial != serial) return;
        Teardown(*c, why);
        AttemptFailed(*c, why);
      });
      return;
    }
    if (--link->handshake_left == 0) OnReady(*link->conn);
    return;
  }
  if (r->done) return;  // its deadline passed: drop the late reply
  if (reply != nullptr) {
    // Answered: the deadline no longer applies; delivered by AfterIo once
    // hiredis's read has returned (see the top of this file).
    deadlines_.Remove(r.get());
    r->result = ReplyFromHiredis(*reply);
    ready_.push_back(std::move(r));
  } else if (link->tearing_down) {
    Complete(std::move(r), link->fail_status);
  } else {
    const char* err = link->ac != nullptr ? link->ac->errstr : nullptr;
    Complete(std::move(r),
             absl::UnavailableError(absl::StrCat(
                 Endpoint(), ": connection lost",
                 err != nullptr && err[0] ? absl::StrCat(": ", err) : "")));
  }
}

void HiredisTransport::AfterIo(void* self) {
  static_cast<HiredisTransport*>(self)->DeliverReplies();
}

void HiredisTransport::DeliverReplies() {
  if (ready_.empty()) return;
  bool gone = false;
  bool* const outer = gone_;
  gone_ = &gone;
  while (!ready_.empty()) {
    std::unique_ptr<Request> r = ready_.pop_front();
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

void HiredisTransport::Complete(std::unique_ptr<Request> request,
                                absl::StatusOr<Reply> result) {
  if (request->done) return;
  // The outcome is known: it is delivered even if the deadline passes
  // before the next loop turn.
  deadlines_.Remove(request.get());
  request->result = std::move(result);
  Event e;
  e.request = std::move(request);
  events_.Push(std::move(e));
}

// ---------------------------------------------------------------------------
// Deadlines (the list and its timer: command_deadlines.cc).

void HiredisTransport::OnDeadline(Request* request) {
  if (request->done) return;
  request->done = true;
  --pending_;
  // The request stays where it is (waiting queue or reply FIFO) so that the
  // reply order stays right; its late reply is dropped.
  ReplyCallback cb = std::move(request->callback);
  std::move(cb)(absl::DeadlineExceededError(
      absl::StrCat(Endpoint(), ": no reply before the command's deadline")));
  // `this` may be gone now.
}

// ---------------------------------------------------------------------------
// Deferred events.

HiredisTransport::Event HiredisTransport::FnEvent(
    absl::AnyInvocable<void(bool cancelled) &&> fn) {
  Event e;
  e.fn = std::move(fn);
  return e;
}

void HiredisTransport::Deliver(Event&& e) {
  if (e.request != nullptr) {
    Request& r = *e.request;
    if (r.done) return;
    r.done = true;
    --pending_;
    ReplyCallback cb = std::move(r.callback);
    std::move(cb)(std::move(r.result));
  } else if (e.ready_for != 0) {
    SubscriberSet::ReadyCallback cb = subscribers_.TakeReady(e.ready_for);
    if (cb) std::move(cb)(std::move(e.ready_status));
  } else if (e.fn) {
    std::move(e.fn)(false);
  }
}

void HiredisTransport::Close() {
  if (closed_) return;
  closed_ = true;
  const absl::Status cancelled = absl::CancelledError("transport closed");
  for (Conn* c : {cmd_.get(), sub_.get()}) {
    if (c->attempt_timer != 0) timers_.Cancel(c->attempt_timer);
    if (c->connect_timer != 0) timers_.Cancel(c->connect_timer);
    c->attempt_timer = c->connect_timer = 0;
    Teardown(*c, cancelled);  // in-flight commands → events_
    c->state = Conn::State::kIdle;
  }
  // Everything still owed a callback, in order: answered or cut-off commands
  // first, then commands that were waiting for a connection, then waiters.
  std::vector<absl::AnyInvocable<void() &&>> owed;
  auto owe_request = [&](std::unique_ptr<Request> r) {
    deadlines_.Remove(r.get());
    if (r->done) return;
    r->done = true;
    --pending_;
    owed.push_back([cb = std::move(r->callback), cancelled]() mutable {
      std::move(cb)(cancelled);
    });
  };
  while (!ready_.empty()) owe_request(ready_.pop_front());
  std::deque<Event> events = events_.TakeAll();
  for (Event& e : events) {
    if (e.request != nullptr) {
      owe_request(std::move(e.request));
    } else if (e.ready_for != 0) {
      continue;  // the subscriber loop below owes its on_ready
    } else if (e.fn) {
      owed.push_back([fn = std::move(e.fn)]() mutable { std::move(fn)(true); });
    }
  }
  while (!waiting_.empty()) owe_request(waiting_.pop_front());
  for (auto& cb : connect_waiters_) {
    owed.push_back([cb = std::move(cb), cancelled]() mutable { std::move(cb)(cancelled); });
  }
  connect_waiters_.clear();
  for (SubscriberSet::ReadyCallback& cb : subscribers_.TakeAllReady()) {
    owed.push_back([cb = std::move(cb), cancelled]() mutable { std::move(cb)(cancelled); });
  }
  channels_.clear();
  // Every request is gone now; the timer handle is freed by libuv's close
  // callback (so the host can uv_loop_close after one more loop run).
  deadlines_.Close();
  // Run them touching no member: a callback may destroy the transport.
  for (auto& fn : owed) std::move(fn)();
}

}  // namespace dlock
