#include "dlock/redlock/acquire_votes.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dlock/lock/reply_status.h"

namespace dlock {
namespace redlock_internal {

bool CountAcquireAnswer(QuorumRound& round, size_t i,
                        const absl::StatusOr<int64_t>& fence) {
  if (fence.ok()) {
    round.Set(i, Vote::kYes);
    round.set_value(i, *fence);
  } else if (IsYoungDataSet(fence.status())) {
    round.Set(i, Vote::kUncounted);
    round.NoteError(fence.status());
    return true;
  } else if (absl::IsAborted(fence.status())) {
    round.Set(i, Vote::kNo);
  } else {
    round.Fail(i, fence.status(), /*timeouts=*/true);
  }
  return false;
}

absl::Status AcquireRoundFailure(const QuorumRound& round, int quorum,
                                 bool validity_over) {
  const Tally t = round.Count();
  const std::string counts = absl::StrFormat(
      "%d of %d servers granted (need %d): %d held by another owner, "
      "%d failed (%d timed out), %d young (data set began less than the "
      "restart window ago)",
      t.yes, t.servers, quorum, t.no, t.failed, t.timed_out, t.uncounted);
  if (validity_over) {
    return absl::DeadlineExceededError(
        absl::StrCat("validity ran out during acquire: ", counts));
  }
  if (t.no > 0) {
    return absl::AbortedError(absl::StrCat("lock is held by another owner: ", counts));
  }
  return absl::UnavailableError(
      absl::StrCat("not enough servers: ", counts, round.LastErrorSuffix()));
}

Grants CollectGrants(const QuorumRound& round) {
  Grants g;
  const size_t n = round.size();
  g.granted.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (round.vote(i) != Vote::kYes) continue;
    g.granted[i] = round.value(i);
    g.fence = std::max(g.fence, g.granted[i]);
  }
  for (int64_t f : g.granted) g.confirmed += f == g.fence;
  return g;
}

AttemptDecision DecideAttempt(const QuorumRound& round, int quorum, const AcquireClock& clock,
                              absl::Time now, bool round_over) {
  AttemptDecision d;
  const Tally t = round.Count();
  if (t.yes >= quorum) {
    d.failure = clock.CheckValidity(now);
    d.kind = d.failure.ok() ? AttemptDecision::kGranted : AttemptDecision::kFailed;
    return d;
  }
  if (t.yes + t.pending >= quorum) return d;  // still possible
  d.kind = AttemptDecision::kFailed;
  d.failure = AcquireRoundFailure(round, quorum, round_over && now >= clock.ValidityEnd());
  return d;
}

}  // namespace redlock_internal
}  // namespace dlock
