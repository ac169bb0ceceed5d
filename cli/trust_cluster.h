// This header defines the Redis Cluster part of `dlock trust`: a cluster
// keeps one data-set marker per slot (KeyScheme::SlotDataSetKey), so trust
// reads all 16384 and, with --force, declares the untrusted ones trusted
// (TrustClusterDataSetCommands), each on its slot's master.
#ifndef DLOCK_CLI_TRUST_CLUSTER_H_
#define DLOCK_CLI_TRUST_CLUSTER_H_

#include <cstddef>

#include "absl/time/time.h"
#include "dlock/cli/session.h"
#include "dlock/lock/keys.h"

namespace dlock {
namespace cli {

struct TrustCounts {
  int failed = 0;     // markers that could not be read or set
  int foreign = 0;    // markers holding something else than a time
  int untrusted = 0;  // absent or a start time (before --force)
};

// Prints one summary line for the cluster behind URL `i` and adds to
// `counts`. `now_ms`: the cluster's clock (Unix ms) for the ages.
void TrustCluster(Session& s, size_t i, const KeyScheme& keys, int64_t now_ms,
                  absl::Duration restart_window, bool force, TrustCounts* counts);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_TRUST_CLUSTER_H_
