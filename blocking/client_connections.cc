#include "dlock/blocking/client_connections.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/blocking/client_options.h"

namespace dlock {
namespace blocking_internal {
namespace {

// "name: message", unless the message already names the server.
std::string Named(const std::string& name, absl::string_view message) {
  if (absl::StrContains(message, name)) return std::string(message);
  return absl::StrCat(name, ": ", message);
}

// What a transport factory handed over must be usable.
absl::Status CheckTransports(const ClientConnections::Transports& transports,
                             const BlockingClientOptions& options) {
  if (transports.empty()) {
    return absl::InvalidArgumentError("BlockingClient: no transport given");
  }
  for (const auto& t : transports) {
    if (t == nullptr) return absl::InvalidArgumentError("BlockingClient: a transport is null");
  }
  return CheckServerCount(options, transports.size());
}

// The outcome of one connect wait, shared by the transports' Connect
// callbacks and the timeout timer. The first decision wins.
struct ConnectWait {
  explicit ConnectWait(Completion<absl::Status> done) : done(std::move(done)) {}
  Completion<absl::Status> done;
  int ok = 0;
  int failed = 0;
  std::vector<std::string> errors;
};

// Connects every transport; see ClientConnections::Adopt.
void AwaitConnectQuorum(EventLoop* loop, const ClientConnections::Transports& transports,
                        const std::vector<std::string>& names, absl::Duration timeout,
                        Completion<absl::Status> done) {
  const int n = static_cast<int>(transports.size());
  const int quorum = n / 2 + 1;
  auto wait = std::make_shared<ConnectWait>(std::move(done));
  for (int i = 0; i < n; ++i) {
    std::string name = names[i];
    absl::Status s = transports[i]->Connect([wait, name, n, quorum](absl::Status s) {
      if (s.ok()) {
        if (++wait->ok >= quorum) wait->done(absl::OkStatus());
        return;
      }
      wait->errors.push_back(Named(name, s.message()));
      if (++wait->failed > n - quorum) {
        wait->done(absl::UnavailableError(absl::StrCat(
            n == 1 ? "cannot connect to Redis: "
                   : absl::StrCat("no quorum of ", quorum, " of ", n, " Redis servers reachable: "),
            absl::StrJoin(wait->errors, "; "))));
      }
    });
    if (!s.ok()) wait->done(s);
  }
  // The bound, in case an attempt outlives the timeout (e.g. a slow name
  // lookup). Dropped without running if the loop stops first (then the
  // wait ends with kCancelled).
  loop->RunAfter(timeout, [wait, n, quorum, names]() {
    std::vector<std::string> errors = wait->errors;
    if (errors.empty()) errors.push_back(absl::StrJoin(names, ", "));
    wait->done(absl::UnavailableError(
        absl::StrCat(n == 1 ? "cannot connect to Redis within the connect timeout: "
                            : absl::StrCat("no quorum of ", quorum, " of ", n,
                                           " Redis servers within the connect timeout: "),
                     absl::StrJoin(errors, "; "))));
  });
}

// Runs `done` once `t` has no command waiting for a reply or at
// `deadline`, whichever comes first. Each PING goes behind everything sent
// before it on the connection, so its reply comes after theirs.
void WhenDrained(Transport* t, EventLoop* loop, absl::Time deadline,
                 std::shared_ptr<absl::AnyInvocable<void()>> done) {
  if (!*done) return;  // already ran (e.g. a PING failed by Close)
  const absl::Duration left = deadline - loop->Now();
  if (t->pending_commands() == 0 || left <= absl::ZeroDuration()) {
    if (*done) std::exchange(*done, nullptr)();
    return;
  }
  absl::Status s = t->Send({"PING"}, left, [t, loop, deadline, done](absl::StatusOr<Reply>) {
    WhenDrained(t, loop, deadline, done);
  });
  if (!s.ok() && *done) std::exchange(*done, nullptr)();
}

}  // namespace

void ClientConnections::Adopt(EventLoop* loop, absl::StatusOr<Transports> made,
                              std::vector<std::string> names, const BlockingClientOptions& options,
                              Completion<absl::Status> done) {
  if (!made.ok()) {
    done(made.status().code() == absl::StatusCode::kInvalidArgument
             ? made.status()
             : absl::InvalidArgumentError(
                   absl::StrCat("BlockingClient: transport factory: ", made.status().message())));
    return;
  }
  transports_ = *std::move(made);
  if (absl::Status valid = CheckTransports(transports_, options); !valid.ok()) {
    // The usable ones are still closed by DrainAndClose; a null one is not
    // a transport at all.
    transports_.erase(std::remove(transports_.begin(), transports_.end(), nullptr),
                      transports_.end());
    done(valid);
    return;
  }
  while (names.size() < transports_.size()) {
    names.push_back(absl::StrCat("server ", names.size()));
  }
  names_ = std::move(names);
  AwaitConnectQuorum(loop, transports_, names_, options.connect_timeout, std::move(done));
}

void ClientConnections::Drain(EventLoop* loop, absl::Time deadline,
                              absl::AnyInvocable<void() &&> done) {
  auto all = std::make_shared<absl::AnyInvocable<void()>>(
      [done = std::move(done)]() mutable { std::move(done)(); });
  auto left = std::make_shared<size_t>(transports_.size());
  if (*left == 0) {
    (*all)();
    return;
  }
  // Copies of the raw pointers: `done` may close and clear transports_.
  std::vector<Transport*> ts;
  for (auto& t : transports_) ts.push_back(t.get());
  for (Transport* t : ts) {
    auto one = std::make_shared<absl::AnyInvocable<void()>>([left, all] {
      if (--*left == 0) (*all)();
    });
    WhenDrained(t, loop, deadline, std::move(one));
  }
}

void ClientConnections::DrainAndClose(EventLoop* loop, absl::Time deadline,
                                      absl::AnyInvocable<void() &&> done) {
  Drain(loop, deadline, [this, done = std::move(done)]() mutable {
    for (auto& t : transports_) t->Close();
    transports_.clear();
    std::move(done)();
  });
}

}  // namespace blocking_internal
}  // namespace dlock
