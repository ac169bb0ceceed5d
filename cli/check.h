// This header defines the analysis behind `dlock check`: the facts gathered
// from one Redis server and the rules that judge whether dlock's locks are
// safe on it.
//
//   rule              | safe                       | unsafe / warning
//   ------------------+----------------------------+----------------------------
//   version           | >= 2.6.12 (EVAL, SET NX PX)| older: UNSAFE
//   role              | master                     | replica: UNSAFE (READONLY)
//   scripting         | EVAL "return 1" gives 1    | error (ACL, disabled): UNSAFE
//   maxmemory-policy  | noeviction                 | allkeys-*: UNSAFE (evicts any
//                     |                            | key); volatile-*: UNSAFE (lock
//                     |                            | keys all have a TTL)
//                     |                            | unreadable (CONFIG renamed):
//                     |                            | warning
//   persistence       | RedLock: appendonly yes +  | RedLock otherwise: warning
//   (RedLock restart  | appendfsync always         | (restart a crashed server
//   rule)             | single server: informative | only after the longest TTL)
//   latency           | max round trip < ttl / 10  | warning
//   PUBLISH on the    | allowed                    | refused (ACL NOPERM): warning
//   release channel   |                            | (releases work; waiters are
//                     |                            | not woken, they fall back to
//                     |                            | their retry backoff)
//   SUBSCRIBE to it   | confirmed                  | refused / unconfirmed: warning
//                     |                            | (waiters poll with backoff)
//   TLS               | rediss:// with the server  | --tls-insecure-skip-verify:
//                     | certificate verified       | warning (not authenticated)
//   instance identity | every server a different   | two entries with the same
//   (SameInstance-    | run_id                     | run_id (listed twice, another
//   Groups)           |                            | host name, another DB): UNSAFE
//   data set (restart | marker trusted (0) or      | younger than the window, or
//   rule: Analyze-    | older than the window      | no marker yet (the first
//   DataSet)          |                            | acquire starts the window):
//                     |                            | WARN, refuses acquires; names
//                     |                            | `dlock trust --force`
//
// Pure functions; thread-safe.
#ifndef DLOCK_CLI_CHECK_H_
#define DLOCK_CLI_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dlock {
namespace cli {

struct ServerFacts {
  std::string address;  // for display
  std::string version;  // INFO server redis_version; empty if unknown
  std::string role;     // INFO replication role; empty if unknown
  // CONFIG GET results; nullopt when CONFIG could not be read.
  std::optional<std::string> maxmemory_policy;
  std::optional<std::string> maxmemory;
  std::optional<std::string> appendonly;
  std::optional<std::string> appendfsync;
  std::optional<std::string> save;
  // Judged only where the server has replicas to wait for (a cluster's
  // masters, a Sentinel master): AnalyzeMinReplicasToWrite.
  std::optional<std::string> min_replicas_to_write;
  absl::Status config_error;  // why CONFIG could not be read
  // OK when `EVAL "return 1" 0` returned 1, else why not.
  absl::Status scripting;
  // Timed PING round trips.
  std::vector<absl::Duration> round_trips;
  // INFO server run_id; empty if unknown.
  std::string run_id;
  // Result of a PUBLISH on a channel named like dlock's release channels;
  // nullopt when not tried. kPermissionDenied for an ACL NOPERM.
  std::optional<absl::Status> publish;
  // Result of a SUBSCRIBE to such a channel (what waiters do); nullopt when
  // not tried.
  std::optional<absl::Status> subscribe;
  // Reached over TLS (rediss://), and whether certificate verification was
  // turned off (--tls-insecure-skip-verify).
  bool tls = false;
  bool tls_insecure_skip_verify = false;
};

struct Finding {
  enum class Level { kOk, kInfo, kWarning, kUnsafe };
  Level level = Level::kOk;
  std::string message;
};

// Judges one server. `redlock`: the server is one of several (RedLock), so
// the restart rule applies. `ttl`: the lease TTL the latency is compared to.
std::vector<Finding> AnalyzeServer(const ServerFacts& facts, bool redlock,
                                   absl::Duration ttl);

// A master's min-replicas-to-write (-1: unknown -> no finding): 0 is a
// warning (a master cut off from its replicas keeps granting leases the
// replica promoted in its place will not have), more is ok.
std::vector<Finding> AnalyzeMinReplicasToWrite(int min_replicas_to_write);

// Indices of servers that are one Redis instance (same non-empty run_id),
// one group per instance with at least two entries, in order of first
// appearance. RedLock over them is no RedLock: one instance holds several
// votes.
std::vector<std::vector<size_t>> SameInstanceGroups(const std::vector<std::string>& run_ids);

// The restart rule's data-set marker on one server (KeyScheme::DataSetKey):
// when its data set began, by the server's own clock.
struct DataSetFacts {
  std::string marker_key;
  // GET of the marker: nullopt when there is none; "0" when trusted.
  std::optional<std::string> marker;
  int64_t server_now_ms = 0;  // TIME, in Unix ms
};

// Judges the marker under the restart rule with `restart_window` (zero: the
// rule is off -> no finding). A data set younger than the window, or none
// yet, refuses every acquire until the window has passed: a warning that says
// how long is left and names `trust_command` (the `dlock trust --force ...`
// line for this server) with when it is safe. Foreign data under the marker:
// unsafe (every acquire fails).
std::vector<Finding> AnalyzeDataSet(const DataSetFacts& facts, absl::Duration restart_window,
                                    const std::string& trust_command);

// "ok", "info", "WARN", "UNSAFE".
const char* LevelName(Finding::Level level);

// The closing line of a `dlock check` run from its counts, e.g.
//   "result: OK (0 unsafe, 0 warnings, 0 unreachable)"
//   "result: OK with 6 warnings (0 unsafe, 6 warnings, 0 unreachable)"
//   "result: UNSAFE (1 unsafe, 0 warnings, 0 unreachable)"
//   "result: UNSAFE under --strict (0 unsafe, 2 warnings, 0 unreachable)"
//   "result: INCOMPLETE (0 unsafe, 1 warning, 1 unreachable)"
// The word after "result: " is what the exit code says (docs/cli.md): OK
// (exit 0, warnings or not), UNSAFE (78: an unsafe finding, or any warning
// under --strict), INCOMPLETE (69: a server unreachable, nothing unsafe);
// "with N warning(s)" tells an OK with warnings from a clean one.
std::string CheckResultLine(int unsafe, int warnings, int unreachable, bool strict);

// Parses "7.0.15" (or "2.6") into comparable parts; false if malformed.
bool ParseVersion(const std::string& text, int* major, int* minor, int* patch);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_CHECK_H_
