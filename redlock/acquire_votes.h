// Internal to //redlock (namespace redlock_internal): the rules by which
// the servers' answers to one acquire attempt are counted and the attempt
// decided (ACQUIRE and FENCING in redlock.h). Pure functions over a
// QuorumRound: no I/O, no timers; AcquireOp (acquire_op.cc) runs the
// attempts, retries and releases around them, AcquireClock keeps their
// times.
#ifndef DLOCK_REDLOCK_ACQUIRE_VOTES_H_
#define DLOCK_REDLOCK_ACQUIRE_VOTES_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/redlock/acquire_clock.h"
#include "dlock/redlock/quorum_round.h"

namespace dlock {
namespace redlock_internal {

// Records server i's answer to the acquire script in `round`: a fence is a
// yes (with its value), "held by another owner" (kAborted) a no, the
// young-data-set refusal an uncounted vote, anything else a failure
// (timeouts as such). Returns true for the young-data-set refusal, which
// the caller also notes against the server.
bool CountAcquireAnswer(QuorumRound& round, size_t i,
                        const absl::StatusOr<int64_t>& fence);

// Why an attempt that can no longer reach `quorum` failed: kDeadlineExceeded
// when the round is over and the validity ran out (`validity_over`),
// kAborted when some server reported another owner, else kUnavailable. The
// message gives the counts and the last server error.
absl::Status AcquireRoundFailure(const QuorumRound& round, int quorum,
                                 bool validity_over);

// The granting servers' fences: `granted[i]` is server i's fence (-1: it
// did not grant), `fence` the highest, `confirmed` how many granted exactly
// that one (a quorum of them means no fence write-back is needed).
struct Grants {
  absl::InlinedVector<int64_t, QuorumRound::kInlineServers> granted;
  int64_t fence = 0;
  int confirmed = 0;
};
Grants CollectGrants(const QuorumRound& round);

// The state of an attempt's voting round at `now`: granted once a quorum
// said yes (failed instead, with CheckValidity's error, if its validity ran
// out first); failed, with AcquireRoundFailure's error, once a quorum can no
// longer be reached (`round_over`: the round's deadline passed); else
// undecided.
struct AttemptDecision {
  enum Kind { kUndecided, kGranted, kFailed };
  Kind kind = kUndecided;
  absl::Status failure;  // kFailed
};
AttemptDecision DecideAttempt(const QuorumRound& round, int quorum, const AcquireClock& clock,
                              absl::Time now, bool round_over);

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_ACQUIRE_VOTES_H_
