// Internal to //redlock (namespace redlock_internal): the fencing
// write-back of an acquire attempt (see FENCING in redlock.h). When the
// granting servers returned different counters (their fence high-water
// marks, lock/script_prelude.h), `FenceSync` raises the lagging ones to the
// lease's fence (never lowers a mark) until a quorum of granting servers
// holds a mark >= it. Rare: once level, the marks of servers that see the
// same grants stay level, and no FenceSync is made.
#ifndef DLOCK_REDLOCK_FENCE_SYNC_H_
#define DLOCK_REDLOCK_FENCE_SYNC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/redlock/core.h"
#include "dlock/redlock/quorum_round.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace redlock_internal {

// The fence write-back script (a constant SHA-1; see fence_sync.cc).
const Script& RaiseFenceScript();

class FenceSync : public std::enable_shared_from_this<FenceSync> {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  // Raises the counter of `resource` on server i to `fence`, fire and
  // forget (a late grant of a lease with a lagging counter, so the counters
  // converge); the reply is reported to the observer ("fence").
  static void RaiseLate(std::shared_ptr<Core> core, absl::string_view resource,
                        absl::Duration ttl, int64_t fence, size_t i);

  // `done` runs once, on a later loop turn: OK when a quorum confirmed
  // before `validity_end`; kDeadlineExceeded when the validity ran out
  // first; kUnavailable when a quorum is impossible or not confirmed within
  // the per-server timeout.
  FenceSync(std::shared_ptr<Core> core, absl::string_view resource, absl::Duration ttl,
            int64_t fence, absl::Time validity_end, Done done);

  // `granted[i]`: the counter server i returned with its grant, or -1 when
  // it did not grant. Sends the write-back to each granting server whose
  // counter lags. Returns kUnavailable (and `done` never runs) when a
  // quorum cannot be reached even so.
  absl::Status Start(absl::Span<const int64_t> granted);
  // `done` never runs.
  void Cancel();

 private:
  void OnReply(uint32_t generation, size_t i, const absl::Status& status);
  void OnDeadline();
  void End(absl::Status status);

  const std::shared_ptr<Core> core_;
  const std::string resource_;
  const absl::Duration ttl_;
  const int64_t fence_;
  const absl::Time validity_end_;
  Done done_;
  QuorumRound round_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_FENCE_SYNC_H_
