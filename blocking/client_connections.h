// Internal to //blocking (namespace blocking_internal): the connections of
// a `BlockingClient`, one `Transport` per Redis server, from the moment a
// transport factory handed them over until they are closed: checked,
// named, connected to a quorum within the connect timeout, and at the end
// drained (what is in flight gets its answer, within a bound) and closed.
// Not part of the API.
//
// Lifetime: Adopt and DrainAndClose run on the loop thread, and the
// transports live and die there; the object itself may be created and
// destroyed on any thread once DrainAndClose has finished (or nothing was
// adopted). Not thread-safe: call only on the loop thread.
#ifndef DLOCK_BLOCKING_CLIENT_CONNECTIONS_H_
#define DLOCK_BLOCKING_CLIENT_CONNECTIONS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/blocking/blocking_client.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace blocking_internal {

class ClientConnections {
 public:
  using Transports = std::vector<std::unique_ptr<Transport>>;

  // Takes what a transport factory returned (`made`; its error becomes
  // kInvalidArgument), checks it (at least one transport, none null,
  // CheckServerCount), names the servers (`names`, completed with
  // "server i"), connects every transport and calls `done` once: OK when a
  // quorum (n/2 + 1; 1 of 1) is connected, kUnavailable naming the
  // servers' errors once a quorum can no longer connect or at
  // `options.connect_timeout`, whichever comes first.
  void Adopt(EventLoop* loop, absl::StatusOr<Transports> made, std::vector<std::string> names,
             const BlockingClientOptions& options, Completion<absl::Status> done);

  // Runs `done` once no transport has a command waiting for a reply (each
  // transport is checked again behind a PING after what it has in flight,
  // so what a reply's callback sends -- a NOSCRIPT fallback's EVAL, a late
  // grant's release -- is waited for too), or at `deadline`, whichever
  // comes first. Closes nothing. A transport that does not report
  // pending_commands() is not waited for.
  void Drain(EventLoop* loop, absl::Time deadline, absl::AnyInvocable<void() &&> done);

  // Drain(loop, deadline), then closes every transport before destroying
  // any (so a callback that Close() runs never meets a destroyed
  // transport), then runs `done`.
  void DrainAndClose(EventLoop* loop, absl::Time deadline, absl::AnyInvocable<void() &&> done);

  const Transports& transports() const { return transports_; }
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return transports_.size(); }

 private:
  Transports transports_;
  std::vector<std::string> names_;
};

}  // namespace blocking_internal
}  // namespace dlock

#endif  // DLOCK_BLOCKING_CLIENT_CONNECTIONS_H_
