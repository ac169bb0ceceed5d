// This header defines how every fenced store (//fenced: the Redis store and
// the PostgreSQL store) reports its outcome, so a caller handles a stale
// holder the same way whatever the store.
//
// A fenced write applies only if the caller's fence (Lease::fence) is at
// least the highest fence the store has recorded for that resource. Outcomes:
//   - applied: OK (or the StatusOr's value);
//   - stale:   kFailedPrecondition, "stale fence F < highest H seen for
//              resource R", with H also as a payload (HighestSeenFence);
//   - bad input (empty resource, fence <= 0): kInvalidArgument, checked
//     before anything is sent (CheckFenceArgs);
//   - the store unreachable or failing: kUnavailable / kDeadlineExceeded,
//     as everywhere in dlock; nothing was applied when the store says so,
//     and a write whose outcome is unknown is never applied twice.
#ifndef DLOCK_FENCED_FENCE_STATUS_H_
#define DLOCK_FENCED_FENCE_STATUS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace dlock {
namespace fenced {

// kFailedPrecondition: `fence` is below `highest`, the highest fence the
// store has recorded for `resource`. The message names all three; the
// highest fence is attached as a payload for HighestSeenFence.
absl::Status StaleFenceError(absl::string_view resource, int64_t fence, int64_t highest);

// True for a status made by StaleFenceError.
bool IsStaleFence(const absl::Status& status);

// The store's highest fence carried by a StaleFenceError; nullopt for any
// other status.
absl::optional<int64_t> HighestSeenFence(const absl::Status& status);

// kInvalidArgument for an empty resource or a fence <= 0 (dlock's fences
// start at 1: a 0 means the caller passed a lease that was never granted,
// or no lease at all); OK otherwise.
absl::Status CheckFenceArgs(absl::string_view resource, int64_t fence);

}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_FENCE_STATUS_H_
