// ReconnectingTransport: see reconnecting_transport.h.
//
// Why a reply may be delivered without waiting for a later loop turn: a
// link reads only from the loop's I/O callbacks, never inside Send (which
// only formats the command into the output buffer), so no reply callback
// can run inside Send. It is not delivered inside the link's read either
// (hiredis's own callback), but right after the read returns
// (LinkEvents::AfterLinkIo, same loop turn): a user callback may close or
// destroy the transport, and hiredis 0.14 defers a redisAsyncFree called
// inside one of its callbacks until that callback returns, then runs the
// remaining reply callbacks with privdata that is gone by then.
#include "dlock/transport/uv/reconnecting_transport.h"

#include <signal.h>

#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace {

// hiredis and libuv write with write(2), so a peer that went away raises
// SIGPIPE.
void IgnoreSigpipeIfDefault() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
      !(old.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

std::string EndpointOf(const HiredisTransportOptions& o) {
  if (!o.unix_socket.empty()) return o.unix_socket;
  return absl::StrCat(o.host, ":", o.port);
}

}  // namespace

ReconnectingTransport::ReconnectingTransport(uv_loop_s* loop,
                                             const HiredisTransportOptions& options,
                                             bool ping_on_setup)
    : loop_(loop),
      options_(options),
      endpoint_(EndpointOf(options)),
      timers_(loop),
      cmd_(ConnectionParams{loop, &timers_, &options_, &endpoint_, &backoff_, &ledger_, this,
            /*pubsub=*/false, ping_on_setup}),
      sub_(ConnectionParams{loop, &timers_, &options_, &endpoint_, &backoff_, &ledger_, this,
            /*pubsub=*/true, ping_on_setup}) {
  IgnoreSigpipeIfDefault();
}

ReconnectingTransport::~ReconnectingTransport() { Close(); }

bool ReconnectingTransport::connected() const {
  return cmd_.state() == ReconnectingConnection::State::kReady;
}

uint64_t ReconnectingTransport::connection_epoch() const {
  return !closed_ && connected() ? epoch_ : 0;
}

absl::Status ReconnectingTransport::last_error() const { return cmd_.last_error(); }

size_t ReconnectingTransport::pending_commands() const { return ledger_.pending(); }

absl::Status ReconnectingTransport::Send(std::vector<std::string> argv,
                                         absl::Duration timeout, ReplyCallback callback) {
  absl::InlinedVector<absl::string_view, 16> views(argv.begin(), argv.end());
  return Submit(views, &argv, timeout, std::move(callback));
}

absl::Status ReconnectingTransport::SendArgv(absl::Span<const absl::string_view> argv,
                                             absl::Duration timeout,
                                             ReplyCallback callback) {
  return Submit(argv, nullptr, timeout, std::move(callback));
}

absl::Status ReconnectingTransport::SendScript(absl::string_view body,
                                               absl::Span<const absl::string_view> evalsha_argv,
                                               absl::Duration timeout, ReplyCallback callback) {
  if (!closed_ && evalsha_argv.size() < 3) {
    return absl::InvalidArgumentError("a script command needs EVALSHA, sha1 and numkeys");
  }
  return Submit(evalsha_argv, nullptr, timeout, std::move(callback), &body);
}

absl::Status ReconnectingTransport::SendTransaction(TransactionCommands commands,
                                                    absl::Duration timeout,
                                                    ReplyCallback callback) {
  absl::Status s = ValidateTransaction(commands, timeout);
  if (!s.ok() && !closed_) return s;
  static constexpr absl::string_view kExec[] = {"EXEC"};
  return Submit(kExec, nullptr, timeout, std::move(callback), nullptr, &commands);
}

absl::Status ReconnectingTransport::Submit(absl::Span<const absl::string_view> argv,
                                           std::vector<std::string>* owned,
                                           absl::Duration timeout, ReplyCallback callback,
                                           const absl::string_view* script_body,
                                           const TransactionCommands* tx) {
  if (closed_) return absl::CancelledError("transport closed");
  if (absl::Status s = ValidateSendArguments(
          argv.size(), argv.empty() ? absl::string_view() : argv[0], timeout,
          callback != nullptr);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CommandRequest> r = ledger_.Start(std::move(callback), timeout);
  if (script_body != nullptr) {
    r->script_argv = argv;
    r->script_body = *script_body;
  }
  switch (cmd_.state()) {
    case ReconnectingConnection::State::kReady:
      cmd_.IssueAny(std::move(r), argv, tx);
      break;
    case ReconnectingConnection::State::kIdle:
    case ReconnectingConnection::State::kConnecting:
      ledger_.Hold(std::move(r), argv, owned, tx);
      break;
    case ReconnectingConnection::State::kBackoff:
      ledger_.Complete(std::move(r),
                       absl::UnavailableError(absl::StrCat(
                           "not connected (retrying in the background); last error: ",
                           cmd_.last_error().message())));
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Subscription>> ReconnectingTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!on_message) return absl::InvalidArgumentError("null on_message");
  return pubsub_.Subscribe(std::move(channel), std::move(on_message), std::move(on_ready));
}

absl::Status ReconnectingTransport::Connect(
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  if (closed_) return absl::CancelledError("transport closed");
  if (!callback) return absl::InvalidArgumentError("null callback");
  waiters_.Add(std::move(callback));
  switch (cmd_.state()) {
    case ReconnectingConnection::State::kReady:
      waiters_.Notify(absl::OkStatus());
      break;
    case ReconnectingConnection::State::kConnecting:
      break;
    case ReconnectingConnection::State::kIdle:
    case ReconnectingConnection::State::kBackoff:
      cmd_.StartAttempt();
      break;
  }
  return absl::OkStatus();
}

void ReconnectingTransport::OnConnectionReady(ReconnectingConnection& conn) {
  if (conn.pubsub()) {
    pubsub_.OnReady();
    return;
  }
  ++epoch_;
  RequestQueue waiting;
  ledger_.TakeWaiting(&waiting);
  while (!waiting.empty()) {
    std::unique_ptr<CommandRequest> r = waiting.pop_front();
    if (!r->done) cmd_.IssueWaiting(std::move(r));  // else: timed out while waiting
  }
  waiters_.Notify(absl::OkStatus());
}

bool ReconnectingTransport::OnConnectionDown(ReconnectingConnection& conn,
                                             const absl::Status& why, bool was_ready) {
  if (conn.pubsub()) return pubsub_.OnDown(why, was_ready);
  if (!was_ready) {
    ledger_.FailWaiting(why);
    waiters_.Notify(why);
  }
  return true;
}

void ReconnectingTransport::Close() {
  if (closed_) return;
  closed_ = true;
  const absl::Status cancelled = absl::CancelledError("transport closed");
  cmd_.Close(cancelled);  // in-flight commands → the ledger
  sub_.Close(cancelled);
  // Everything still owed a callback, in order: answered or cut-off commands
  // first, then commands that were waiting for a connection, then waiters.
  CommandLedger::Owed owed;
  ledger_.TakeOwed(&owed);
  waiters_.TakeCancelled(cancelled, &owed);
  for (SubscriberSet::ReadyCallback& cb : pubsub_.Close()) {
    owed.push_back([cb = std::move(cb), cancelled]() mutable { std::move(cb)(cancelled); });
  }
  // Run them touching no member: a callback may destroy the transport.
  for (auto& fn : owed) std::move(fn)();
}

}  // namespace dlock
