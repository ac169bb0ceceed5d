#include "dlock/transport/fake/fake_fault_plan.h"

#include <algorithm>
#include <utility>

namespace dlock {

FakeFaultPlan::Fate FakeFaultPlan::TakeNext() {
  if (fail_remaining_ > 0) {
    --fail_remaining_;
    return Fate::kFail;
  }
  if (drop_requests_ > 0) {
    --drop_requests_;
    return Fate::kDropRequest;
  }
  if (drop_replies_ > 0) {
    --drop_replies_;
    return Fate::kDropReply;
  }
  return Fate::kApply;
}

void FakeFaultPlan::SetLatency(absl::Duration round_trip) {
  round_trip = std::max(round_trip, absl::ZeroDuration());
  const absl::Duration request = round_trip / 2;
  SetLatency(request, round_trip - request);
}

void FakeFaultPlan::SetLatency(absl::Duration request, absl::Duration reply) {
  request_latency_ = std::max(request, absl::ZeroDuration());
  reply_latency_ = std::max(reply, absl::ZeroDuration());
}

void FakeFaultPlan::SetSubscribeDelay(absl::Duration delay) {
  subscribe_delay_ = std::max(delay, absl::ZeroDuration());
}

void FakeFaultPlan::DropNextRequests(int n) { drop_requests_ = std::max(n, 0); }
void FakeFaultPlan::DropNextReplies(int n) { drop_replies_ = std::max(n, 0); }

void FakeFaultPlan::FailNext(int n, absl::Status status) {
  if (status.ok()) status = absl::UnknownError("FakeTransport::FailNext with an OK status");
  fail_remaining_ = std::max(n, 0);
  fail_outcome_ = std::move(status);
}

void FakeFaultPlan::FailNextWithReply(int n, Reply reply) {
  fail_remaining_ = std::max(n, 0);
  fail_outcome_ = std::move(reply);
}

}  // namespace dlock
