// Internal to //transport/uv: `ReconnectingConnection`, one connection to a
// Redis server that persists across reconnects -- the command connection or
// the pub/sub connection of HiredisTransport and TlsTransport -- and
// `ConnectionOwner`, the transport it reports to.
//
// It is the state machine of hiredis_transport.h's table (idle, connecting,
// ready, backoff), the same for both transports: an attempt resolves the
// host (HostLookup, skipped for an IP literal or a unix socket), opens a
// RedisLink (the owner's: hiredis or TLS), runs `AUTH [user] password`,
// `SELECT db` (command connection only) and, when asked, `PING` (so that an
// attempt ends with a round trip), all bounded by connect_timeout. A failed
// attempt backs off (ReconnectBackoff); a connection lost after being ready
// for ReconnectBackoff::kStable is retried at once, one lost sooner backs
// off. Its LinkSession keeps the FIFO of commands in flight on the current
// link: replies are handed to the CommandLedger in order, and when the link
// goes every command still in it fails with the reason.
//
// Scripts keep command order (transport.h, issue 22). The session keeps the
// SHA-1s loaded on its link (empty for every new link). A script request
// whose SHA-1 is not in the set goes out as `SCRIPT LOAD body` + `EVALSHA`,
// written back to back, and the SHA-1 joins the set at once (every later
// EVALSHA on the link is behind the load). A SCRIPT LOAD refused (ACL,
// compile error) takes the SHA-1 out again, and its error reply stands for
// the EVALSHA's NOSCRIPT. A NOSCRIPT otherwise means the cache was flushed
// under the link: the set is cleared; if nothing was written after the
// script on this link (the FIFO behind it is empty, checked while its reply
// is read, before any user callback can send), load + EVALSHA are written
// again, once, inside the read, which keeps the order; else the script
// fails with kUnavailable (kScriptCacheFlushedMessage).
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_RECONNECTING_CONNECTION_H_
#define DLOCK_TRANSPORT_UV_RECONNECTING_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/uv/command_ledger.h"
#include "dlock/transport/uv/connection_options.h"
#include "dlock/transport/uv/host_lookup.h"
#include "dlock/transport/uv/reconnect_backoff.h"
#include "dlock/transport/uv/redis_link.h"

struct uv_loop_s;

namespace dlock {

class ReconnectingConnection;

// The transport a connection reports to.
class ConnectionOwner {
 public:
  // Opens the byte stream of one attempt to `address` (an IP address, or
  // the host for a unix socket), reporting to `events`. An error fails the
  // attempt.
  virtual absl::StatusOr<std::unique_ptr<RedisLink>> OpenLink(const std::string& address,
                                                              LinkEvents* events) = 0;
  // `conn` became ready (handshake done).
  virtual void OnConnectionReady(ReconnectingConnection& conn) = 0;
  // An attempt of `conn` failed, or (`was_ready`) its ready connection was
  // lost. Returns whether to keep reconnecting (else `conn` goes idle).
  virtual bool OnConnectionDown(ReconnectingConnection& conn, const absl::Status& why,
                                bool was_ready) = 0;
  // A reply on the pub/sub connection that no command waits for.
  virtual void OnPush(Reply reply) = 0;

 protected:
  ~ConnectionOwner() = default;
};

// What a connection is built from; all of it must outlive the connection.
struct ConnectionParams {
  uv_loop_s* loop;                        // for HostLookup
  EventLoop* timers;                      // clock and timers
  const HiredisTransportOptions* options;
  const std::string* endpoint;            // named in errors
  ReconnectBackoff* backoff;
  CommandLedger* ledger;
  ConnectionOwner* owner;
  bool pubsub;         // no SELECT; unanswered replies are pushes
  bool ping_on_setup;  // end every attempt with a PING round trip
};

// The link of the current attempt and what is on its wire: the handshake
// (AUTH, SELECT, PING) and the FIFO of commands in flight, whose replies go
// to the ledger in order. Part of ReconnectingConnection.
class LinkSession : private LinkEvents {
 public:
  LinkSession(ReconnectingConnection* conn, const ConnectionParams* p) : conn_(conn), p_(p) {}
  LinkSession(const LinkSession&) = delete;
  LinkSession& operator=(const LinkSession&) = delete;

  // The events a new link of this session reports to.
  LinkEvents* events() { return this; }
  // Takes the link of a new attempt.
  void Attach(std::unique_ptr<RedisLink> link);
  const RedisLink* link() const { return link_.get(); }
  // See ReconnectingConnection::Issue and WritePush.
  void Issue(std::unique_ptr<CommandRequest> request,
             absl::Span<const absl::string_view> argv);
  // See ReconnectingConnection::IssueScript.
  void IssueScript(std::unique_ptr<CommandRequest> request);
  // Sends a transaction (Transport::SendTransaction): MULTI, `commands`,
  // EXEC written back to back on the one link (nothing can come between
  // them, and a reconnect cannot split them), the replies of MULTI and the
  // queued commands dropped, EXEC's reply (or the failure) going to the
  // ledger for `request`.
  void IssueTransaction(std::unique_ptr<CommandRequest> request,
                        absl::Span<const absl::Span<const absl::string_view>> commands);
  // Sends a request that waited for the connection (CommandLedger::Wait,
  // WaitScript, WaitTransaction) as it was asked.
  void IssueWaiting(std::unique_ptr<CommandRequest> request);
  bool WritePush(absl::Span<const absl::string_view> argv);
  // Drops the link (it never calls back) and fails the commands in flight
  // with `why`, through the ledger.
  void Drop(const absl::Status& why);

 private:
  // LinkEvents.
  void OnLinkOpen() override;
  void OnLinkReply(Reply reply) override;
  void OnLinkLost(absl::Status why) override;
  void AfterLinkIo() override { p_->ledger->DeliverReplies(); }
  bool PushReplies() const override { return p_->pubsub; }

  ReconnectingConnection* const conn_;
  const ConnectionParams* const p_;
  std::unique_ptr<RedisLink> link_;
  // A script request's NOSCRIPT reply (see the header comment).
  void OnNoScript(std::unique_ptr<CommandRequest> r);
  RequestQueue fifo_;  // sent on `link_`, in reply order
  // SHA-1s loaded on `link_` (SCRIPT LOAD written; see the header comment).
  absl::flat_hash_set<std::string> loaded_;
  // The error reply of a refused SCRIPT LOAD, for the EVALSHA right behind.
  std::optional<Reply> load_error_;
  // The first error reply of a transaction's MULTI or queued commands.
  std::optional<Reply> tx_error_;
  int handshake_left_ = 0;
  bool handshake_failed_ = false;
};

class ReconnectingConnection {
 public:
  enum class State { kIdle, kConnecting, kReady, kBackoff };

  // Starts idle.
  explicit ReconnectingConnection(const ConnectionParams& params)
      : p_(params), session_(this, &p_) {}
  ReconnectingConnection(const ReconnectingConnection&) = delete;
  ReconnectingConnection& operator=(const ReconnectingConnection&) = delete;
  ~ReconnectingConnection();

  State state() const { return state_; }
  bool pubsub() const { return p_.pubsub; }
  // The failure of the last attempt or lost connection; OK once ready.
  const absl::Status& last_error() const { return last_error_; }

  // Starts an attempt now (also from backoff). Nothing while one is under
  // way or after Close.
  void StartAttempt();
  // Sends a command on the ready connection; its reply (or failure) goes to
  // the ledger.
  void Issue(std::unique_ptr<CommandRequest> request,
             absl::Span<const absl::string_view> argv) {
    session_.Issue(std::move(request), argv);
  }
  // Sends a script request (CommandRequest::script_argv set) on the ready
  // connection, loading the script first if the link has not (see the
  // header comment); its reply (or failure) goes to the ledger.
  void IssueScript(std::unique_ptr<CommandRequest> request) {
    session_.IssueScript(std::move(request));
  }
  // Sends a transaction or a request that waited for the connection on
  // the ready connection: LinkSession's.
  void IssueTransaction(std::unique_ptr<CommandRequest> request,
                        absl::Span<const absl::Span<const absl::string_view>> commands) {
    session_.IssueTransaction(std::move(request), commands);
  }
  void IssueWaiting(std::unique_ptr<CommandRequest> request) {
    session_.IssueWaiting(std::move(request));
  }
  // IssueTransaction when `tx` is set, else IssueScript for a script
  // request (CommandRequest::script_argv), else Issue.
  void IssueAny(std::unique_ptr<CommandRequest> request, absl::Span<const absl::string_view> argv,
                const absl::Span<const absl::Span<const absl::string_view>>* tx) {
    if (tx != nullptr) {
      session_.IssueTransaction(std::move(request), *tx);
    } else if (!request->script_argv.empty()) {
      session_.IssueScript(std::move(request));
    } else {
      session_.Issue(std::move(request), argv);
    }
  }
  // Sends a command whose replies come as pushes (SUBSCRIBE, UNSUBSCRIBE).
  // False when there is no link to write to.
  bool WritePush(absl::Span<const absl::string_view> argv) {
    return session_.WritePush(argv);
  }
  // Stops for good: cancels the timers, drops the link and fails the
  // commands in flight with `why` (through the ledger). Idempotent.
  void Close(const absl::Status& why);

 private:
  friend class LinkSession;

  void Open(const std::string& address);
  void ScheduleAttempt(absl::Duration delay);
  // Ends the attempt or connection: drops the link, fails the FIFO.
  void Teardown(const absl::Status& why);
  // The link failed or was lost (LinkSession).
  void LinkLost(absl::Status why);
  // The server refused the handshake: fails the attempt on a later turn
  // (outside the link's own callback).
  void HandshakeRefused(absl::Status why);
  void AttemptFailed(absl::Status why);
  void ConnectionLost(absl::Status why);
  void OnReady();
  // A timer for the current attempt: `fn` runs only if it is still on.
  void ForThisAttempt(absl::Duration delay, TimerId* id, absl::AnyInvocable<void()> fn);

  const ConnectionParams p_;
  LinkSession session_;
  State state_ = State::kIdle;
  bool closed_ = false;
  bool attempt_on_ = false;  // an attempt is under way (resolve..handshake)
  uint64_t serial_ = 0;      // counts attempts
  std::unique_ptr<HostLookup> lookup_;  // while the host name resolves
  int failures_ = 0;  // consecutive failed attempts and quick losses
  absl::Time ready_since_ = absl::InfinitePast();
  TimerId attempt_timer_ = 0;  // the backoff delay
  TimerId connect_timer_ = 0;  // connect_timeout
  TimerId fail_timer_ = 0;     // a refused handshake, failed on a later turn
  absl::Status last_error_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_RECONNECTING_CONNECTION_H_
