// Internal to //transport/fake:fake_transport. This header defines
// `FakeFaultPlan`: the faults injected into one FakeTransport connection --
// latencies, the next commands to drop or fail, a slow pub/sub connection,
// and whether the connection is partitioned. It only decides; the command
// queue and the subscriptions of the transport carry the decisions out.
// FakeTransport's fault methods (see fake_transport.h) forward here.
//
// Not thread-safe: call only on the thread running the transport's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_FAULT_PLAN_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_FAULT_PLAN_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/reply.h"

namespace dlock {

class FakeFaultPlan {
 public:
  // The fate of one command sent while not partitioned.
  enum class Fate {
    kApply,        // applied on the server, the reply delivered
    kDropReply,    // applied, the reply lost (only the deadline answers)
    kDropRequest,  // never reaches the server (only the deadline answers)
    kFail,         // not applied; answered with fail_outcome() after the round trip
  };

  // Takes the fate of the next command, using up one injected fault:
  // FailNext* first, then DropNextRequests, then DropNextReplies.
  Fate TakeNext();
  // The outcome of a kFail command (set by FailNext or FailNextWithReply).
  const absl::StatusOr<Reply>& fail_outcome() const { return fail_outcome_; }

  // Negative values count as zero. SetLatency(rtt) splits it in halves.
  void SetLatency(absl::Duration round_trip);
  void SetLatency(absl::Duration request, absl::Duration reply);
  void SetSubscribeDelay(absl::Duration delay);
  // Negative counts count as zero.
  void DropNextRequests(int n);
  void DropNextReplies(int n);
  // An OK `status` becomes kUnknown (a failure must fail).
  void FailNext(int n, absl::Status status);
  void FailNextWithReply(int n, Reply reply);
  void set_partitioned(bool partitioned) { partitioned_ = partitioned; }

  absl::Duration request_latency() const { return request_latency_; }
  absl::Duration reply_latency() const { return reply_latency_; }
  absl::Duration subscribe_delay() const { return subscribe_delay_; }
  bool partitioned() const { return partitioned_; }

 private:
  absl::Duration request_latency_ = absl::ZeroDuration();
  absl::Duration reply_latency_ = absl::ZeroDuration();
  absl::Duration subscribe_delay_ = absl::ZeroDuration();
  int drop_requests_ = 0;
  int drop_replies_ = 0;
  int fail_remaining_ = 0;
  absl::StatusOr<Reply> fail_outcome_ = absl::UnavailableError("unset");
  bool partitioned_ = false;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_FAULT_PLAN_H_
