// This header defines `Session`: what every `dlock` subcommand shares -- one
// libuv loop, dlock's `UvEventLoop` over it, and one `Transport` per
// `--redis` server -- plus a blocking `Call` for the simple request/reply
// steps of `status` and `check` (the CLI is a top-level program; it may run
// the loop until an answer comes).
//
// Not thread-safe: everything runs on the thread that created the Session.
#ifndef DLOCK_CLI_SESSION_H_
#define DLOCK_CLI_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/cli/commands.h"
#include "dlock/transport/uv/cluster_transport.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/tls_options.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"

struct uv_loop_s;

namespace dlock {
namespace cli {

class Session {
 public:
  // Opens the loop and one transport per URL (connections are made in the
  // background; the first command waits for them). `tls` applies to the
  // rediss:// URLs.
  static absl::StatusOr<std::unique_ptr<Session>> Open(
      const std::vector<RedisUrl>& urls, const TlsOptions& tls,
      absl::Duration command_timeout);
  // Lets the commands still in flight be answered (DrainCommands, bounded
  // by the deadline an earlier DrainCommands set, else by the command
  // timeout), then closes the transports and the loop (runs it until every
  // handle closed).
  ~Session();

  uv_loop_s* uv_loop() const { return uv_loop_; }
  EventLoop* loop() const { return loop_.get(); }
  const std::vector<RedisUrl>& urls() const { return urls_; }
  size_t size() const { return transports_.size(); }
  Transport* transport(size_t i) const { return transports_[i].get(); }
  std::vector<Transport*> transports() const;
  absl::Duration command_timeout() const { return command_timeout_; }

  // Sends `argv` to server `i` and runs the loop until the reply (or the
  // transport's failure) arrives.
  absl::StatusOr<Reply> Call(size_t i, std::vector<std::string> argv);
  // The same on any transport of this session's loop (e.g. one node of a
  // cluster).
  absl::StatusOr<Reply> CallOn(Transport& t, std::vector<std::string> argv);
  // Server `i`'s cluster transport when its URL is redis-cluster://, else
  // null.
  ClusterTransport* cluster(size_t i) const { return clusters_[i]; }

  // Runs `script` (Script::Run: EVALSHA, loaded on the connection first) on server `i`
  // and runs the loop until its reply arrives.
  absl::StatusOr<Reply> RunScript(size_t i, const Script& script,
                                  std::vector<std::string> keys,
                                  std::vector<std::string> args);

  // Runs the loop until `done()` is true or nothing is left to run.
  // Returns false in the latter case.
  bool RunUntil(absl::FunctionRef<bool()> done);

  // Runs the loop until no transport has a command waiting for its reply
  // (Transport::pending_commands() is 0 on every one, and stays 0 across a
  // further loop turn, so what a reply's callback sends or posts -- a
  // NOSCRIPT re-send, a late grant's release -- is waited for too),
  // or until `bound` has passed since the FIRST call (later calls never
  // extend it: a short-lived process waits at most `bound` in total).
  // Returns true when drained. A short-lived process calls it before it
  // exits so that the releases it sent are not cut off with the connection:
  // RedLock's Release reports at quorum while the other servers' releases
  // are still in flight. A server that does not answer (down, stalled)
  // holds the exit up by at most `bound`; what it still holds expires with
  // its TTL.
  bool DrainCommands(absl::Duration bound);

  // Drops every transport (pending callbacks get kCancelled), e.g. before
  // the loop is run dry at exit.
  void CloseTransports();

 private:
  // Sends with `send(callback)` and runs the loop until the callback ran:
  // its outcome, or `send`'s rejection.
  absl::StatusOr<Reply> AwaitReply(absl::FunctionRef<absl::Status(ReplyCallback)> send);

  Session() = default;

  uv_loop_s* uv_loop_ = nullptr;
  std::unique_ptr<EventLoop> loop_;
  std::vector<RedisUrl> urls_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<ClusterTransport*> clusters_;  // per transport, may be null
  absl::Duration command_timeout_;
  // Set by the first DrainCommands: when draining stops, whatever is left.
  absl::Time drain_deadline_ = absl::InfiniteFuture();
};

// What every subcommand does first, one way:
//   OpenForCommand: Session::Open with `common`'s URLs, TLS and timeout; on
//     failure prints "dlock: <status>" on stderr, sets `*exit_code` to
//     ExitCodeForStatus and returns null.
//   CheckResourceArgument: ValidateResource of a RESOURCE argument; kExitOk,
//     or kExitUsage after printing "dlock: <why>" on stderr.
std::unique_ptr<Session> OpenForCommand(const CommonOptions& common, int* exit_code);
int CheckResourceArgument(absl::string_view resource);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_SESSION_H_
