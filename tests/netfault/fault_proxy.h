// This header defines `FaultProxy`, a small TCP proxy for dlock's network
// fault tests: it sits between one client and one server (the client
// connects to the proxy's port, the proxy connects on to the target) and
// injects faults that can be applied and lifted while the run goes on:
//
//   fault            per direction | what the endpoints see
//   -----------------+-------------+------------------------------------------
//   delay + jitter   yes           | every chunk read at t is forwarded at
//                                  | t + delay + uniform[0, jitter), never
//                                  | before an earlier chunk of the same
//                                  | connection and direction (order kept
//                                  | within a connection; connections get
//                                  | their own draws, so commands on
//                                  | different connections are reordered)
//   stall            yes           | bytes are read and held; lifting the
//                                  | stall forwards them all, in order
//   blackhole (drop) yes           | bytes are read and thrown away: the
//                                  | connection stays open, nothing arrives
//                                  | (one-way or, both directions set, a
//                                  | silent partition)
//   reset            both          | every open connection is closed with
//                                  | RST on both sides (SO_LINGER 0)
//   refuse           -             | new connections are accepted and reset
//                                  | at once, until lifted
//
// Directions: kToServer (client -> server) and kToClient (server ->
// client). A fault applies to every connection, open or future, until it is
// changed; Heal() lifts them all (held bytes are then forwarded). EOF from
// one side closes the connection once everything read before it has been
// forwarded; a reset from one side resets the other.
//
// The proxy runs on a thread of its own (poll(2); every wait bounded by
// 50 ms), started by Start and joined by the destructor, which closes every
// connection. Bound: at most `max_connections` open at once (further ones
// are reset).
//
// This class is thread-safe.
#ifndef DLOCK_TESTS_NETFAULT_FAULT_PROXY_H_
#define DLOCK_TESTS_NETFAULT_FAULT_PROXY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dlock {
namespace netfault {

enum class Direction { kToServer = 0, kToClient = 1 };

struct FaultProxyOptions {
  // Where the proxy listens; port 0 picks a free port (see port()).
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;
  // Where it forwards to.
  std::string target_host = "127.0.0.1";
  int target_port = 0;
  // When non-empty, the address the proxy's upstream connections are bound
  // to (e.g. 127.0.3.1), so a partition rule can single them out.
  std::string source_host;
  // Seed of the jitter draws (0: from the OS).
  uint64_t seed = 0;
  int max_connections = 256;
};

struct FaultProxyStats {
  int64_t accepted = 0;       // connections accepted
  int64_t open = 0;           // connections open now
  int64_t resets = 0;         // connections closed by ResetConnections/refuse
  int64_t forwarded[2] = {0, 0};  // bytes written, per Direction
  int64_t dropped[2] = {0, 0};    // bytes thrown away (blackhole), per Direction
  int64_t held[2] = {0, 0};       // bytes read, not yet forwarded, per Direction
};

class FaultProxy {
 public:
  // Binds, listens and starts the proxy thread. kInvalidArgument for a bad
  // address or port; kUnavailable when the socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(FaultProxyOptions options);
  ~FaultProxy();

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  const std::string& host() const;
  int port() const;

  // Delay each chunk by `base` + uniform[0, `jitter`) in direction `d`.
  // Zero both to forward at once. Applies to bytes read from now on.
  void SetDelay(Direction d, absl::Duration base, absl::Duration jitter = absl::ZeroDuration());
  // Hold every byte of direction `d` (true) or forward what was held (false).
  void SetStalled(Direction d, bool stalled);
  // Throw away every byte of direction `d` read while set.
  void SetBlackhole(Direction d, bool on);
  // Reset new connections at once while set.
  void SetRefuse(bool on);
  // Resets every open connection (RST to both sides); returns how many.
  int ResetConnections();
  // Lifts every fault of both directions (delays to zero, stalls lifted,
  // blackholes and refuse off). Held bytes are forwarded.
  void Heal();

  FaultProxyStats stats() const;

  struct Impl;

 private:
  explicit FaultProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace netfault
}  // namespace dlock

#endif  // DLOCK_TESTS_NETFAULT_FAULT_PROXY_H_
