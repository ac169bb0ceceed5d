// This header defines what `dlock check` learns about a Sentinel deployment
// (a redis-sentinel:// URL) besides the master's own checks, and how it
// judges it: replicas in sync, min-replicas-to-write on the master, and the
// sentinels' ability to fail over (reachable, CKQUORUM).
#ifndef DLOCK_CLI_CHECK_SENTINEL_H_
#define DLOCK_CLI_CHECK_SENTINEL_H_

#include <string>
#include <vector>

#include "dlock/cli/check.h"

namespace dlock {
namespace cli {

struct SentinelFacts {
  std::string master_name;
  // "host:port" of the master the transport confirmed ("" if none).
  std::string master_address;
  // INFO replication on the master: replicas with state=online (-1: unknown).
  int replicas_online = -1;
  // CONFIG GET min-replicas-to-write on the master (-1: unknown).
  int min_replicas_to_write = -1;
  // The URL's sentinels, and how many answered.
  int sentinels_listed = 0;
  int sentinels_reachable = 0;
  // SENTINEL CKQUORUM on the first reachable sentinel: ok, else its answer.
  bool quorum_ok = false;
  std::string quorum_answer;
  // SENTINEL MASTER: the configured quorum and the sentinels it knows
  // (itself included; -1: unknown).
  int quorum = -1;
  int sentinels_known = -1;
};

std::vector<Finding> AnalyzeSentinel(const SentinelFacts& facts);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_CHECK_SENTINEL_H_
