// This header defines `SentinelDiscovery`, the master discovery of a
// SentinelTransport (sentinel_transport.h). A round asks each sentinel in
// turn `SENTINEL get-master-addr-by-name <name>`; the first address given
// is checked with `ROLE` (on the current master's connection when it is the
// same address, else on a new candidate connection), and only a server that
// answers "master" ends the round. A round in which no sentinel names a
// confirmed master fails with kUnavailable naming every sentinel's answer;
// rounds then repeat with capped backoff (200 ms .. 2 s) while no master is
// known. A Discover() during a round runs another round after it.
//
// Outcomes go to the owner: a new master (its connection), the round's end
// (confirmed), the current master demoted (ROLE says otherwise), a failed
// round. Each may run user callbacks and so destroy the owner, and this.
//
// Not thread-safe: call only on the loop's thread. The loop, the options,
// the factory, the sentinels and the master must outlive it.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_DISCOVERY_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_DISCOVERY_H_

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/sentinel_master.h"
#include "dlock/transport/uv/sentinel_options.h"
#include "dlock/transport/uv/sentinel_set.h"

namespace dlock {

class SentinelDiscovery {
 public:
  struct Outcomes {
    // A master at another address confirmed: install `connection`.
    absl::AnyInvocable<void(std::unique_ptr<Transport> connection, std::string host,
                            int port)>
        new_master;
    // The round ended with a confirmed master (after new_master, if any).
    absl::AnyInvocable<void()> confirmed;
    // The current master's ROLE is no longer master: drop it.
    absl::AnyInvocable<void()> demoted;
    // The round failed (kUnavailable, also in last_error()).
    absl::AnyInvocable<void(const absl::Status&)> failed;
  };

  SentinelDiscovery(EventLoop* loop, const SentinelTransportOptions& options,
                    SentinelConnectionFactory* factory, SentinelSet* sentinels,
                    SentinelMaster* master, Outcomes outcomes);
  SentinelDiscovery(const SentinelDiscovery&) = delete;
  SentinelDiscovery& operator=(const SentinelDiscovery&) = delete;
  ~SentinelDiscovery();

  // Starts a round, or asks for another one after the round under way.
  void Discover();
  bool discovering() const { return discovering_; }
  // The last round's failure (OK after a confirmed master).
  const absl::Status& last_error() const { return last_error_; }

  // No round starts or ends after this.
  void Stop();
  // Closes the candidate connection, if any.
  void CloseCandidate();

 private:
  void AskSentinel(size_t index);
  void OnSentinelAnswer(size_t index, absl::StatusOr<Reply> reply);
  void NoteRoundError(size_t index, absl::string_view what);
  void CheckRole(size_t index, std::string host, int port);
  void OnRole(size_t index, std::string host, int port, bool same,
              absl::StatusOr<Reply> reply);
  void RoundFailed();

  EventLoop* const loop_;
  const SentinelTransportOptions& options_;
  SentinelConnectionFactory* const factory_;
  SentinelSet* const sentinels_;
  SentinelMaster* const master_;
  Outcomes outcomes_;
  bool stopped_ = false;
  bool discovering_ = false;
  // A hint arrived during a round: run another one after it.
  bool again_ = false;
  std::string round_errors_;
  absl::Status last_error_;
  absl::Duration backoff_ = absl::ZeroDuration();
  TimerId retry_timer_ = 0;
  // A connection being checked with ROLE.
  std::unique_ptr<Transport> candidate_;
  // Expires when this is destroyed; callbacks check it.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_DISCOVERY_H_
