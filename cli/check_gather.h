// This header defines the parts of `dlock check` shared by a standalone
// server (check_command.cc) and a Redis Cluster (check_cluster_command.cc):
// gathering one server's ServerFacts over any transport, printing findings,
// and checking a cluster.
#ifndef DLOCK_CLI_CHECK_GATHER_H_
#define DLOCK_CLI_CHECK_GATHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/cli/check.h"
#include "dlock/cli/session.h"
#include "dlock/lock/keys.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace cli {

// Fills `f` (all but address and tls) from the server behind `t` with plain
// commands (PING, INFO, CONFIG GET, EVAL, PUBLISH, SUBSCRIBE, timed PINGs).
// Returns why the server is unreachable (the first PING failed), else OK.
absl::Status GatherServerFacts(Session& s, Transport& t, const KeyScheme& keys, int pings,
                               ServerFacts* f);

// Prints each finding indented, counts the unsafe ones (also reported on
// stderr with `address`) and the warnings.
void PrintFindings(const std::vector<Finding>& findings, const std::string& address,
                   int* unsafe, int* warnings);

// `dlock check` of the cluster behind URL `i` (Session::cluster(i)): the
// cluster's state (AnalyzeCluster) and every master as a server
// (AnalyzeServer), adding to the counts.
void CheckCluster(Session& s, size_t i, const KeyScheme& keys, absl::Duration ttl, int pings,
                  int* unsafe, int* warnings, int* unreachable);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_CHECK_GATHER_H_
