// This header defines the lease rules every policy shares: the resource and
// TTL limits, THE drift allowance, and THE lease TTL check (SimpleLock,
// ReentrantLock, RetryLock, RedLock and the `dlock` tool all use these).
#ifndef DLOCK_LOCK_LEASE_RULES_H_
#define DLOCK_LOCK_LEASE_RULES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dlock {

// The longest resource name accepted (bytes).
inline constexpr size_t kMaxResourceLength = 1024;
// Lease TTL bounds, the same for every policy (SimpleLock, ReentrantLock,
// RetryLock, RedLock, and the `dlock` tool's --ttl).
//
// kMinLeaseTtl = 10 ms. A lease is only worth having if it is still valid
// when the acquire reply arrives: its validity is ttl - drift allowance,
// counted from the send. With the default drift (1% + 2 ms) a 10 ms lease
// keeps 7.9 ms, room for a loopback round trip (about 0.1 ms idle, a few ms
// on a loaded machine). Below that an acquire is either useless or fails
// with a misleading kDeadlineExceeded (a 3 ms lease has 0.97 ms of validity).
inline constexpr absl::Duration kMinLeaseTtl = absl::Milliseconds(10);
// The least validity a lease must keep after its drift allowance. With
// non-default drift options this can raise the minimum above kMinLeaseTtl
// (see MinLeaseTtl); with the defaults it does not.
inline constexpr absl::Duration kMinLeaseValidity = absl::Milliseconds(5);
// The longest lease TTL: 30 days (a policy may have a lower maximum, e.g.
// RedLock's max_ttl).
inline constexpr absl::Duration kMaxTtl = absl::Hours(24 * 30);
// The old name of kMinLeaseTtl.
inline constexpr absl::Duration kMinTtl = kMinLeaseTtl;

// The default drift allowance of every policy: ttl * 1% + 2 ms (Redlock's).
inline constexpr double kDefaultDriftFactor = 0.01;
inline constexpr absl::Duration kDefaultDriftConstant = absl::Milliseconds(2);
// The drift allowance for `ttl`: ttl * factor + constant. A lease's local
// deadline is its send time + ttl - DriftAllowance(ttl).
absl::Duration DriftAllowance(absl::Duration ttl, double factor,
                              absl::Duration constant);
// The smallest TTL accepted under these drift options: kMinLeaseTtl, or
// more if the drift allowance would leave less than kMinLeaseValidity.
// Whole milliseconds. kMaxTtl + 1 ms if no TTL works (factor >= 1).
absl::Duration MinLeaseTtl(double drift_factor, absl::Duration drift_constant);

// THE lease TTL check of every policy. OK iff `ttl`, truncated to whole
// milliseconds (PX takes whole ms; leases record WholeMillis(ttl)), is in
// [MinLeaseTtl(drift_factor, drift_constant), max_ttl]. Otherwise
// kInvalidArgument, whose message states that range, e.g.
//   "ttl 3ms is outside the accepted range [10ms, 720h]"
// Also kInvalidArgument for drift options outside factor in [0, 1),
// constant >= 0, or max_ttl outside [kMinLeaseTtl, kMaxTtl].
absl::Status ValidateLeaseTtl(absl::Duration ttl, absl::Duration max_ttl = kMaxTtl,
                              double drift_factor = kDefaultDriftFactor,
                              absl::Duration drift_constant = kDefaultDriftConstant);

// kInvalidArgument unless `resource` is non-empty and at most
// kMaxResourceLength bytes (any byte allowed, NUL included).
absl::Status ValidateResource(absl::string_view resource);
// ValidateResource, and kInvalidArgument for an empty `token`: the check of
// a lease handed to Release or Extend (every policy, RedLock included).
absl::Status ValidateResourceToken(absl::string_view resource, absl::string_view token);
// ValidateResourceToken, and kInvalidArgument unless `timeout` > 0: the
// check of every one-server lease command (LockCommands, FairCommands).
absl::Status ValidateCommandArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration timeout);
// ValidateCommandArgs and ValidateTtl(ttl): the check of a one-server
// extend command.
absl::Status ValidateCommandArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration ttl, absl::Duration timeout);
// That, and kInvalidArgument for a negative `restart_window`: the check of
// every one-server acquire command.
absl::Status ValidateAcquireArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration ttl, absl::Duration restart_window,
                                 absl::Duration timeout);
// ValidateLeaseTtl(ttl) with the default maximum and drift: the check of
// LockCommands, RetryLock and the `dlock` tool.
absl::Status ValidateTtl(absl::Duration ttl);

// `ttl` as sent to Redis: whole milliseconds, truncated.
int64_t TtlMillis(absl::Duration ttl);
absl::Duration WholeMillis(absl::Duration ttl);

}  // namespace dlock

#endif  // DLOCK_LOCK_LEASE_RULES_H_
