// This header defines the network torture run's checks, beside the overlap
// and fence checks of torture_client.h:
//
//   - Ghost keys: a lock key whose token belongs to no live lease, found
//     after every release has had its release timeout. Two ways:
//       * audits: the driver holds every worker's next acquisition (the
//         gate), waits until all are idle, heals the network, waits the
//         release timeout (plus what held or delayed bytes need to arrive),
//         and reads the lock key on every server; at the end of the run the
//         same after the workers have exited. Nobody holds a lease then, so
//         every key found is a ghost (`AuditFinding`) -- unless a
//         connection to that server was reset since the key's lease could
//         have been granted (its grant - ttl; for a token of no granted
//         lease, the audit - ttl) and the release may have been lost: its
//         outcome was not OK, or the lock is RedLock (whose release reports
//         at quorum while a straggler's may still be lost), or the token is
//         of no granted lease. A reset loses the release in flight, and the
//         key then expires with its TTL, as documented. Those are counted
//         apart (`left_by_resets`).
//       * live samples: while the run goes on, the driver reads the lock key
//         on every server every few ms (`KeySample`). A sample showing the
//         token of a lease whose release completed at r, taken after
//         r + release timeout + kRoundTrips x the largest round-trip delay
//         injected on that server's links since the lease's grant - ttl (a
//         release may take several round trips: EVALSHA, NOSCRIPT, EVAL, or
//         wait behind another command's fallback), is a ghost. Samples of servers
//         whose links lost or held bytes in that time (stall, blackhole,
//         cut, reset) are not judged: a release lost there legitimately
//         leaves the key until its TTL. Tokens of attempts that were never
//         granted are judged by the audits only.
//   - Hand-over time: for each release, the time from when it was sent to
//     the next grant (any worker), p50 / p99, less the time an audit's gate
//     held every acquisition in between.
#ifndef DLOCK_TESTS_TORTURE_NETWORK_CHECK_H_
#define DLOCK_TESTS_TORTURE_NETWORK_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dlock/tests/torture/torture_client.h"

namespace dlock {
namespace torture {

// Round trips a release may need once delays apply (see above); the driver
// waits as many before an audit.
constexpr int kRoundTrips = 4;

// The lock key on `server` read at `t_ns` (when the GET was sent) held
// `token`.
struct KeySample {
  int server = 0;
  int64_t t_ns = 0;
  std::string token;
};

// A fault on at least one link to `server` during [start_ns, end_ns):
// `loses` when bytes may be lost or held (stall, cut, reset); `resets` when
// bytes in flight were certainly lost (connection reset); otherwise a delay
// of at most `delay_ns` per round trip.
struct Impairment {
  int server = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool loses = false;
  int64_t delay_ns = 0;
  bool resets = false;
};

// A key an audit found (nobody held a lease).
struct AuditFinding {
  int server = 0;
  int64_t t_ns = 0;
  std::string token;
  int64_t pttl_ms = 0;
};

struct NetworkInput {
  std::vector<CsRecord> cs;
  std::vector<ReleaseRecord> releases;
  std::vector<KeySample> samples;
  std::vector<Impairment> impairments;
  std::vector<AuditFinding> audit_findings;
  int64_t audits = 0;
  // Intervals during which the gate held acquisitions.
  std::vector<std::pair<int64_t, int64_t>> gates;
  int64_t release_timeout_ns = 0;
  int64_t ttl_ns = 0;
  // One lock server: a release reported OK was applied there.
  bool single_server = false;
};

struct NetworkReport {
  int64_t audits = 0;
  int64_t audit_ghosts = 0;        // distinct (server, token) found by audits
  int64_t left_by_resets = 0;      // keys found by audits after a reset
  int64_t live_ghosts = 0;         // distinct (server, token) from live samples
  int64_t samples = 0;
  int64_t samples_judged = 0;      // samples of a released lease's token
  int64_t handovers = 0;
  double handover_p50_ms = 0;
  double handover_p99_ms = 0;
  double handover_max_ms = 0;
  std::vector<std::string> examples;  // a few ghosts, for the log

  int64_t distinct_ghosts = 0;     // distinct (server, token) of both
  int64_t ghosts() const { return distinct_ghosts; }
};

NetworkReport CheckNetwork(const NetworkInput& in);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_NETWORK_CHECK_H_
