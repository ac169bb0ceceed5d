// This header defines `IsolatedNetwork`: a private network namespace for one
// test run, in which loopback links between clients and servers can be cut
// (one way or both) and healed while the run goes on -- a real partition:
// the kernel silently drops the packets (policy routing `blackhole`), TCP
// retransmits, and after the heal the retransmissions get through. New
// connections to a cut address fail at once (EINVAL), the one difference
// from a partition between hosts, where they time out.
//
// How: `Enter()` moves the CALLING THREAD into a new, anonymous network
// namespace (unshare(CLONE_NEWNET)); every process and thread it starts
// afterwards (redis-servers, worker processes, a FaultProxy's thread) lives
// in it too. It brings `lo` up and moves the `local` table's rule from
// priority 0 to 100, so blackhole rules at priority 10 are consulted first
// (priority 0 cannot be preceded). Inside, all of 127.0.0.0/8 is local:
// a server bound to 127.0.0.1 and 127.0.W.1 can be reached by worker W at
// 127.0.W.1, and the rules single out that worker's link:
//   kToServer:  ip rule add pref 10 to 127.0.W.1 ipproto tcp dport P blackhole
//   kToClient:  ip rule add pref 10 from 127.0.W.1 ipproto tcp sport P blackhole
// Only loopback addresses (127.0.0.0/8) are ever used: Cut refuses others.
//
// Clean-up: the namespace has no name, so nothing can be left behind: the
// kernel deletes it when the last process or thread in it exits, also when
// the run is killed (a named one under /run/netns would outlive a kill -9).
// The destructor deletes every rule it added and tries to move the thread
// back to its original namespace, which a sandbox may forbid (setns needs
// CAP_SYS_ADMIN over the original one; Bazel's linux-sandbox runs tests in
// a user namespace that lacks it). So run the isolated part on a thread of
// its own (`RunIsolated`): the namespace dies with that thread. Stop the
// servers and workers started inside first (they keep it alive until they
// exit).
//
// Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and `ip` (iproute2). Where
// either is missing, Enter() fails with kFailedPrecondition and a one-line
// reason: tests then GTEST_SKIP with it, never pass.
//
// Not thread-safe: use from the thread that called Enter().
#ifndef DLOCK_TESTS_NETFAULT_ISOLATED_NETWORK_H_
#define DLOCK_TESTS_NETFAULT_ISOLATED_NETWORK_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/tests/netfault/fault_proxy.h"

namespace dlock {
namespace netfault {

// One client's path to one server: the client connects to `address`:`port`
// (address in 127.0.0.0/8; the server listens there).
struct Link {
  std::string address;
  int port = 0;
};

class IsolatedNetwork {
 public:
  // kFailedPrecondition "network namespaces unavailable: <reason>" when the
  // namespace cannot be made or set up (not root, no `ip`, ...).
  static absl::StatusOr<std::unique_ptr<IsolatedNetwork>> Enter();
  ~IsolatedNetwork();

  IsolatedNetwork(const IsolatedNetwork&) = delete;
  IsolatedNetwork& operator=(const IsolatedNetwork&) = delete;

  // Drops every packet of `link` in direction `d` (kToServer: what the
  // client sends; kToClient: what the server answers). Idempotent.
  // kInvalidArgument for an address outside 127.0.0.0/8 or a bad port;
  // kInternal when `ip rule` fails (its stderr in the message).
  absl::Status Cut(const Link& link, Direction d);
  // Lets `link`'s packets in direction `d` through again. OK if not cut.
  absl::Status Restore(const Link& link, Direction d);
  // Restores every cut link.
  absl::Status Heal();
  // Number of cuts in place.
  int cuts() const { return static_cast<int>(rules_.size()); }

  // The `ip` binary used.
  const std::string& ip() const { return ip_; }

 private:
  IsolatedNetwork(int original_ns_fd, std::string ip);
  absl::Status Ip(const std::vector<std::string>& args);
  static std::vector<std::string> RuleArgs(const Link& link, Direction d);

  int original_ns_fd_;
  std::string ip_;
  std::vector<std::vector<std::string>> rules_;
};

// Runs `body` on a new thread that has entered a fresh IsolatedNetwork and
// waits for it; returns Enter()'s error (the body then never runs). The
// thread, and with it the namespace, ends when `body` returns.
absl::Status RunIsolated(const std::function<void(IsolatedNetwork&)>& body);

// Runs `ip_binary args...`; kInternal with its stderr when it fails.
absl::Status RunIp(const std::string& ip_binary, const std::vector<std::string>& args);

}  // namespace netfault
}  // namespace dlock

#endif  // DLOCK_TESTS_NETFAULT_ISOLATED_NETWORK_H_
