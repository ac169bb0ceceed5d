// The store side of fencing for shell users: `dlock run` exports the lease's
// fence as $DLOCK_FENCE; these subcommands write to a Redis store through
// RedisFencedStore (dlock/fenced/redis_store.h), so a holder whose lease
// has passed to someone else is refused by the store itself.
//
//   dlock fence-check [--store URL] [--fence N] RESOURCE
//       Checks that the fence is current for RESOURCE on the store (>= the
//       highest recorded) and records it. Exit 0: current, and every holder
//       with a lower fence is now refused. Exit 80: stale.
//   dlock fenced-set  [--store URL] [--fence N] RESOURCE KEY VALUE
//       SET KEY VALUE if the fence is current (records it). Exit 80: stale.
//   dlock fenced-incr [--store URL] [--fence N] [--floor F] RESOURCE KEY DELTA
//       INCRBY KEY DELTA if the fence is current, printing the new value;
//       exit 81 (nothing written) when the result would be below --floor.
//
// The fence comes from --fence, else $DLOCK_FENCE (set by `dlock run`);
// the store from --store, else the (first) --redis URL. KEY must sit in
// RESOURCE's Redis Cluster slot: put "{RESOURCE}" in it (e.g.
// "stock:{sku-42}" for RESOURCE sku-42). The fence records are
// "dlock:fenced:{RESOURCE}" on the store.
//
// Exit codes: 0 done; 80 stale fence (a newer holder wrote: stop); 81 below
// the floor; 64 bad usage (no fence, fence <= 0, a KEY outside RESOURCE's
// slot, a non-integer DELTA); 69 store unreachable or timed out (a timed-out
// write may have applied: read before retrying); 70 foreign data (WRONGTYPE,
// a non-integer value); 77 permission denied.
#ifndef DLOCK_CLI_FENCED_COMMANDS_H_
#define DLOCK_CLI_FENCED_COMMANDS_H_

#include <string>
#include <vector>

#include "dlock/cli/commands.h"

namespace dlock {
namespace cli {

// `verb` is "fence-check", "fenced-set" or "fenced-incr"; `args` the
// positional arguments after it. `store` the store's URL text ("" = the
// first --redis URL), `fence_flag` the --fence value (0 = from
// $DLOCK_FENCE), `floor` the --floor value when given.
int FencedCommand(const CommonOptions& common, const std::string& verb,
                  const std::vector<std::string>& args, const std::string& store,
                  int64_t fence_flag, const int64_t* floor);

// True for the subcommands above.
bool IsFencedCommand(const std::string& verb);

}  // namespace cli
}  // namespace dlock

#endif  // DLOCK_CLI_FENCED_COMMANDS_H_
