// This header defines the checker of the primitives' torture run
// (primitive_driver.h): it judges what the worker processes logged -- one
// `Attempt` per Acquire -- against the nemesis's faults, for issue 16's
// invariants:
//
//   kind        invariant judged
//   ----------  ---------------------------------------------------------
//   rw          never a reader beside a writer, never two writers
//   semaphore   never more than `permits` holders
//   fair        one holder at a time; grants follow queue order except
//               where the waiter passed over was paused long enough for its
//               queue entry to expire (FairLock's documented bound: an entry
//               lives queue_ttl after its last refresh, refreshed every
//               queue_ttl / 3) or the lock server was restarted meanwhile
//   multi       one holder per resource; never a strict subset of a set
//               still held after the acquire's callback reported failure
//
// Validity. Readers and permit holders are not fenced, and a holder paused
// past its TTL really does overlap a newcomer once its lease expired. So an
// overlap counts as a VIOLATION only between the holders' *valid*
// intervals: [grant callback, min(end of the hold, local lease deadline)),
// where the deadline is the latest one the watchdog renewed to (a lease
// declared lost stays valid only up to that deadline). Local deadlines are
// never later than the server-side expiry (lock.h), so two valid intervals
// that intersect mean the server had both granted at once. Overlaps of the
// raw intervals (grant to end of hold) are reported too: they show the
// nemesis did produce overlaps and the checker excused them by validity.
//
// All times are CLOCK_MONOTONIC nanoseconds (worker_processes.h).
#ifndef DLOCK_TESTS_TORTURE_PRIMITIVE_CHECK_H_
#define DLOCK_TESTS_TORTURE_PRIMITIVE_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dlock {
namespace torture {

// One Acquire of one worker incarnation, as logged (primitive_worker.cc):
//   ask <seq> <ns>                         the Acquire call
//   queued <seq> <ns>                      FairLock: the first reply that
//                                          queued this wait
//   grant <seq> <ns> <deadline_ns> <fence> granted (callback)
//   end <seq> <ns> <valid_until_ns> <lost> the hold ended (before release)
//   fail <seq> <ns> <code> <left> <unknown>
//                                          failed; multi: sub-leases still
//                                          held when the callback ran
//                                          (`left`), and those whose
//                                          release outcome was unknown
struct Attempt {
  int worker = 0;
  int incarnation = 0;
  int64_t seq = 0;
  bool reader = false;             // rw: a reader (else a writer)
  std::vector<int> resources;      // multi: the set; else {0}
  int64_t ask_ns = -1;
  int64_t queued_ns = -1;
  int64_t grant_ns = -1;
  int64_t deadline_ns = -1;        // at the grant
  int64_t fence = 0;
  int64_t end_ns = -1;             // hold ended, wait failed, or the worker died
  int64_t valid_until_ns = -1;     // latest renewed deadline
  bool lost = false;               // the watchdog declared the lease lost
  bool failed = false;
  int failure_code = 0;            // absl::StatusCode
  int left = 0;
  int unknown = 0;
};

// Parses one incarnation's log. A hold or wait with no end (the worker was
// killed) ends at `died_ns`. kInvalidArgument names the first bad line.
absl::StatusOr<std::vector<Attempt>> ParseAttempts(absl::string_view log, int worker,
                                                   int incarnation, bool reader,
                                                   const std::vector<int>& resources,
                                                   int64_t died_ns);

// A nemesis fault: a worker (incarnation) paused or killed, or (worker -1)
// the lock server killed and restarted.
struct FaultWindow {
  enum Kind { kPause, kKill, kServerRestart } kind = kPause;
  int worker = -1;
  int incarnation = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct CheckParams {
  std::string kind;              // "rw", "semaphore", "fair", "multi"
  int permits = 1;               // semaphore
  // fair: the queue entry's lifetime and the lease TTL. A waiter paused at
  // t cannot have lost its place (its entry expired, or a grant made to it
  // during the pause expired) before t + min(queue_ttl, ttl) / 2: its last
  // refresh was at most queue_ttl / 3 (plus a round trip) before the pause.
  // Passing it over earlier is a violation; after a restart or once it
  // resumed, it may have rejoined at the back until queue_ttl later.
  int64_t queue_ttl_ns = 0;
  int64_t ttl_ns = 0;
};

struct PrimitiveReport {
  int64_t attempts = 0;
  int64_t grants = 0;
  int64_t failures = 0;
  int64_t lost = 0;                 // leases the watchdog declared lost
  // Grants that entered a state the invariant forbids (a reader beside a
  // writer, permits+1 holders, two holders of one resource), judged on
  // valid intervals; and the same on raw intervals (excused by validity).
  int64_t violations = 0;
  int64_t raw_conflicts = 0;
  int64_t max_valid_holders = 0;    // the most valid holders at one instant
  int64_t max_raw_holders = 0;      // (per resource)
  // fair: a grant that passed over an earlier queued waiter still waiting.
  int64_t overtakes = 0;
  int64_t overtakes_excused = 0;    // by a pause past the bound / a restart
  int64_t fifo_violations = 0;
  int64_t queued_waits = 0;         // waits that queued (FIFO was at stake)
  // multi: sub-leases still held after a failure callback (violations),
  // and releases with an unknown outcome (documented: left to expire).
  int64_t subset_left = 0;
  int64_t subset_unknown = 0;
  std::vector<std::string> examples;  // up to 5 described violations

  int64_t total_violations() const { return violations + fifo_violations + subset_left; }
};

PrimitiveReport CheckPrimitive(const std::vector<Attempt>& attempts,
                               const std::vector<FaultWindow>& faults,
                               const CheckParams& params);

}  // namespace torture
}  // namespace dlock

#endif  // DLOCK_TESTS_TORTURE_PRIMITIVE_CHECK_H_
