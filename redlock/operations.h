// Internal to //redlock (namespace redlock_internal): the three RedLock
// operations, each a QuorumOp running QuorumRounds (see quorum_round.h).
// The algorithm and every outcome are described in redlock.h.
#ifndef DLOCK_REDLOCK_OPERATIONS_H_
#define DLOCK_REDLOCK_OPERATIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/redlock/acquire_attempts.h"
#include "dlock/redlock/acquire_clock.h"
#include "dlock/redlock/attempt_releases.h"
#include "dlock/redlock/core.h"
#include "dlock/redlock/fence_sync.h"
#include "dlock/redlock/quorum_round.h"

namespace dlock {
namespace redlock_internal {

class AcquireOp final : public QuorumOp<absl::StatusOr<Lease>> {
 public:
  AcquireOp(std::shared_ptr<Core> core, absl::string_view resource,
            const AcquireOptions& options, LeaseCallback callback);

  // Sends the first attempt. Never calls back from here.
  void Start() { StartAttempt(/*may_decide_now=*/false); }
  bool Cancel() override;
  void Shutdown() override;

 private:
  enum class Phase { kVoting, kSyncing, kWaiting, kReleasing, kDone };

  // Cancel (`cancel`) or Shutdown: ends the operation, releases what it may hold.
  bool End(bool cancel);
  void StartAttempt(bool may_decide_now);
  void OnAcquireReply(int attempt, uint32_t generation, size_t i,
                      absl::StatusOr<int64_t> fence);
  void OnStraggler(int attempt, size_t i, const absl::StatusOr<int64_t>& fence);
  void Evaluate() { Decide(/*round_over=*/false); }
  void OnVotingDeadline();
  void Decide(bool round_over);
  void StartFenceSync();
  void OnSynced(int attempt, absl::Status status);
  void Succeed();
  void FailAttempt(absl::Status status);
  void StartFinalRelease(absl::Status status);
  void ScheduleRetry(const absl::Status& status, absl::Duration delay);
  void Retry();
  void Finish(absl::StatusOr<Lease> result);
  void Report(const absl::Status& status) override;

  const std::string resource_;
  const absl::Duration ttl_;
  AcquireClock clock_;

  Phase phase_ = Phase::kVoting;
  bool final_ = false;  // no more attempts (a configuration error)
  absl::Status final_status_;  // reported once the final release settled
  int64_t fence_ = 0;          // the current attempt's (the lease's) fence
  AttemptReleases releases_;
  AcquireAttempts attempts_;  // after releases_, which keeps its token's bytes
  std::shared_ptr<FenceSync> sync_;  // kSyncing, when counters disagree
};

class ExtendOp final : public QuorumOp<absl::StatusOr<Lease>> {
 public:
  ExtendOp(std::shared_ptr<Core> core, const Lease& lease, absl::Duration ttl,
           LeaseCallback callback);
  ~ExtendOp() override;
  void Start();
  // Extend hands out no handle; only Shutdown ends it early.
  bool Cancel() override { return false; }
  void Shutdown() override;

 private:
  void OnReply(uint32_t generation, size_t i, const Probe& probe, absl::Status status);
  // Server i extended (or set again) the key of a lease released meanwhile:
  // release it there again (its reply: OnReleasedAgain).
  void ReleaseAgain(size_t i);
  static void OnReleasedAgain(const ReleaseReply& reply, const absl::Status& status);
  void Evaluate() { Decide(/*round_over=*/false); }
  void OnDeadline();
  void Decide(bool round_over);
  void Report(const absl::Status& status) override;

  void Unwatch();

  const Lease lease_;
  const absl::Duration ttl_;
  // Replies still to come, and the watch of the lease's token while they
  // may (LATE GRANTS in redlock.h).
  int outstanding_ = 0;
  Core::GrantWatch watch_;
  bool watching_ = false;
};

class ReleaseOp final : public QuorumOp<absl::Status> {
 public:
  ReleaseOp(std::shared_ptr<Core> core, const Lease& lease, StatusCallback callback);
  void Start();
  bool Cancel() override { return false; }
  void Shutdown() override;

 private:
  void OnReply(uint32_t generation, size_t i, absl::Status status);
  void MaybeResend(size_t i, const absl::Status& status);
  // OnReply and MaybeResend as ReleaseReply handlers.
  static void OnRoundReply(const ReleaseReply& reply, const absl::Status& status);
  static void OnResendReply(const ReleaseReply& reply, const absl::Status& status);
  void Evaluate() { Decide(/*round_over=*/false); }
  void OnDeadline();
  void Decide(bool round_over);
  void Report(const absl::Status& status) override;

  static constexpr uint8_t kResends = 2;

  const std::string resource_;
  const std::string token_;
  const absl::Duration ttl_;
  // Background re-sends per server after an unknown outcome (sized on the
  // first one: the hot path allocates nothing for it).
  std::vector<uint8_t> resends_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_OPERATIONS_H_
