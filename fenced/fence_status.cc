#include "dlock/fenced/fence_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace fenced {
namespace {

// The payload's type URL: the highest fence, in decimal.
constexpr char kHighestFenceUrl[] = "dlock.fenced/highest_seen_fence";

}  // namespace

absl::Status StaleFenceError(absl::string_view resource, int64_t fence, int64_t highest) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      "stale fence ", fence, " < highest ", highest, " seen for resource \"", resource,
      "\": a newer holder has written; this holder's lease is no longer valid"));
  s.SetPayload(kHighestFenceUrl, absl::Cord(absl::StrCat(highest)));
  return s;
}

bool IsStaleFence(const absl::Status& status) {
  return HighestSeenFence(status).has_value();
}

absl::optional<int64_t> HighestSeenFence(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kFailedPrecondition) return absl::nullopt;
  absl::optional<absl::Cord> payload = status.GetPayload(kHighestFenceUrl);
  if (!payload.has_value()) return absl::nullopt;
  int64_t highest = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &highest)) return absl::nullopt;
  return highest;
}

absl::Status CheckFenceArgs(absl::string_view resource, int64_t fence) {
  if (resource.empty()) return absl::InvalidArgumentError("fenced write: empty resource name");
  if (fence <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fenced write to \"", resource, "\": fence ", fence,
        " is not a granted lease's fence (dlock's fences start at 1)"));
  }
  return absl::OkStatus();
}

}  // namespace fenced
}  // namespace dlock
