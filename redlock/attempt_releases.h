// Internal to //redlock (namespace redlock_internal): `AttemptReleases`,
// the cleanup side of one Acquire (see ACQUIRE step 5 and RETRIES in
// redlock.h). It keeps the token of each attempt (numbered from 1), sends
// the releases of what an attempt may have taken, remembers per server the
// releases that could not be confirmed ("leftovers", sent again before the
// next attempt's acquire on that server, on the same connection), and runs
// the final-release round of a failed Acquire.
#ifndef DLOCK_REDLOCK_ATTEMPT_RELEASES_H_
#define DLOCK_REDLOCK_ATTEMPT_RELEASES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/redlock/core.h"
#include "dlock/redlock/quorum_round.h"

namespace dlock {
namespace redlock_internal {

class AttemptReleases {
 public:
  // `core` must outlive this object (the owning operation holds it).
  AttemptReleases(Core* core, absl::string_view resource, absl::Duration ttl)
      : core_(core), resource_(resource), ttl_(ttl) {}

  // Draws attempt `attempt`'s token, first sent at `now`; none of its keys
  // exists after `key_bound`. Forgets tokens whose keys can no longer exist.
  const std::string& Draw(int attempt, absl::Time now, absl::Time key_bound);
  const std::string& token(int attempt) const { return attempts_[attempt - 1].token; }
  absl::Time sent_at(int attempt) const { return attempts_[attempt - 1].sent_at; }

  // Releases attempt `attempt`'s token on server i; its reply is reported
  // (OnServerVote "release") and `owner`, which owns this object, is kept
  // alive until then. If the release cannot be confirmed while the key may
  // still exist, it becomes a leftover. Returns whether it was sent.
  bool Send(const std::shared_ptr<Op>& owner, size_t i, int attempt) {
    return Send(owner, i, attempt, /*track=*/0);
  }
  void SendEverywhere(const std::shared_ptr<Op>& owner, int attempt);
  // Sends server i's leftovers whose keys may still exist.
  void SendLeftovers(const std::shared_ptr<Op>& owner, size_t i);

  // The final release of attempt `attempt` on every server; the round
  // awaits the servers with `await[i]`. `on_settled` runs once each awaited
  // server answered (or Settle()d) or the per-server timeout passed.
  // Returns false, without running it, when nothing is awaited.
  bool StartFinal(const std::shared_ptr<Op>& owner, int attempt,
                  absl::Span<const bool> await, absl::AnyInvocable<void() &&> on_settled);
  // Server i answered attempt `attempt`'s acquire after the attempt was
  // decided. `reason` empty: the grant is kept (part of the lease: its
  // attempt succeeded and the lease was not released, or its fence is being
  // synced). Otherwise it is one of the LateGrantEvent reasons (observer.h)
  // and a grant is released again on server i -- the release sent at the
  // decision (or by Release) may have run before it -- on another
  // connection after a reconnect, or because that release failed -- and
  // reported (OnLateGrant).
  // `final`: the attempt is the failed last one whose final release is
  // running; a timeout of its acquire means its release on server i is not
  // awaited either. Returns true for a kept grant.
  bool OnLateReply(const std::shared_ptr<Op>& owner, size_t i, int attempt,
                   const absl::StatusOr<int64_t>& fence, absl::string_view reason, bool final);
  // The operation ended: no leftover is recorded any more and `on_settled`
  // never runs. Releases still in flight complete and are reported.
  void Close();
  // Cancel or Shutdown ended the operation: Close(), then the release of
  // attempt `in_flight`'s token everywhere (0: none was in flight, its
  // attempt decided) and of every server's leftovers.
  void Abandon(const std::shared_ptr<Op>& owner, int in_flight);

 private:
  struct Attempt {
    std::string token;
    absl::Time sent_at;
    absl::Time key_bound;
  };

  bool Send(const std::shared_ptr<Op>& owner, size_t i, int attempt, uint32_t track);
  // Server i's final release needs no more waiting for.
  void Settle(size_t i);
  void OnReply(size_t i, int attempt, absl::Time sent_at, uint32_t track,
               const absl::Status& status);
  // OnReply as a ReleaseReply's handler (target: this object).
  static void OnReleaseReply(const ReleaseReply& reply, const absl::Status& status);
  void MaybeSettled();
  bool MayStillExist(int attempt, absl::Time now) const;
  void AddLeftover(size_t server, int attempt);

  Core* const core_;
  const std::string resource_;
  const absl::Duration ttl_;
  bool closed_ = false;
  absl::InlinedVector<Attempt, 1> attempts_;
  absl::InlinedVector<std::pair<size_t, int>, 2> leftovers_;  // (server, attempt)
  QuorumRound final_;
  absl::AnyInvocable<void() &&> on_settled_;
};

}  // namespace redlock_internal
}  // namespace dlock

#endif  // DLOCK_REDLOCK_ATTEMPT_RELEASES_H_
