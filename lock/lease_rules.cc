#include "dlock/lock/lease_rules.h"

#include <algorithm>
#include <string>

#include "dlock/lock/error_text.h"

namespace dlock {

absl::Status ValidateResource(absl::string_view resource) {
  if (resource.empty()) {
    return absl::InvalidArgumentError("resource must not be empty");
  }
  if (resource.size() > kMaxResourceLength) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "resource is % bytes; at most % allowed",
                       {resource.size(), kMaxResourceLength});
  }
  return absl::OkStatus();
}

absl::Status ValidateResourceToken(absl::string_view resource, absl::string_view token) {
  absl::Status s = ValidateResource(resource);
  if (!s.ok()) return s;
  if (token.empty()) return absl::InvalidArgumentError("token must not be empty");
  return absl::OkStatus();
}

absl::Status ValidateCommandArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration timeout) {
  absl::Status s = ValidateResourceToken(resource, token);
  if (!s.ok()) return s;
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  return absl::OkStatus();
}

absl::Status ValidateCommandArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration ttl, absl::Duration timeout) {
  absl::Status s = ValidateCommandArgs(resource, token, timeout);
  if (!s.ok()) return s;
  return ValidateTtl(ttl);
}

absl::Status ValidateAcquireArgs(absl::string_view resource, absl::string_view token,
                                 absl::Duration ttl, absl::Duration restart_window,
                                 absl::Duration timeout) {
  absl::Status s = ValidateCommandArgs(resource, token, ttl, timeout);
  if (!s.ok()) return s;
  if (restart_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("restart window must be >= 0");
  }
  return absl::OkStatus();
}

absl::Duration DriftAllowance(absl::Duration ttl, double factor,
                              absl::Duration constant) {
  return ttl * factor + constant;
}

namespace {

bool DriftOptionsValid(double factor, absl::Duration constant) {
  return factor >= 0.0 && factor < 1.0 && constant >= absl::ZeroDuration() &&
         constant < kMaxTtl;
}

}  // namespace

absl::Duration MinLeaseTtl(double drift_factor, absl::Duration drift_constant) {
  if (!DriftOptionsValid(drift_factor, drift_constant)) {
    return kMaxTtl + absl::Milliseconds(1);
  }
  // ttl - (ttl * f + c) >= V  <=>  ttl >= (V + c) / (1 - f); start just
  // below that (whole ms) and step up, so rounding never decides.
  const double bound_ms =
      absl::ToDoubleMilliseconds(kMinLeaseValidity + drift_constant) / (1.0 - drift_factor);
  absl::Duration min = kMinLeaseTtl;
  if (bound_ms > absl::ToDoubleMilliseconds(kMinLeaseTtl)) {
    min = absl::Milliseconds(static_cast<int64_t>(bound_ms) - 1);
  }
  while (min <= kMaxTtl &&
         min - DriftAllowance(min, drift_factor, drift_constant) < kMinLeaseValidity) {
    min += absl::Milliseconds(1);
  }
  return std::max(min, kMinLeaseTtl);
}

absl::Status ValidateLeaseTtl(absl::Duration ttl, absl::Duration max_ttl,
                              double drift_factor, absl::Duration drift_constant) {
  if (!DriftOptionsValid(drift_factor, drift_constant)) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "drift allowance % * ttl + % is invalid: the factor must be in "
                       "[0, 1) and the constant >= 0",
                       {drift_factor, drift_constant});
  }
  if (max_ttl < kMinLeaseTtl || max_ttl > kMaxTtl) {
    return ErrorStatus(absl::StatusCode::kInvalidArgument, "maximum ttl % is outside [%, %]",
                       {max_ttl, kMinLeaseTtl, kMaxTtl});
  }
  const absl::Duration min = MinLeaseTtl(drift_factor, drift_constant);
  // Compare the whole milliseconds that would be sent (ttl > max_ttl first:
  // WholeMillis of an infinite ttl is not meaningful).
  if (ttl > max_ttl || min > max_ttl || WholeMillis(ttl) < min) {
    const std::string why =
        min > kMinLeaseTtl
            ? ErrorText(" (the drift allowance % * ttl + % must leave at least % of validity)",
                        {drift_factor, drift_constant, kMinLeaseValidity})
            : std::string();
    return ErrorStatus(absl::StatusCode::kInvalidArgument,
                       "ttl % is outside the accepted range [%, %]%",
                       {ttl, min, max_ttl, why});
  }
  return absl::OkStatus();
}

absl::Status ValidateTtl(absl::Duration ttl) { return ValidateLeaseTtl(ttl); }

int64_t TtlMillis(absl::Duration ttl) { return absl::ToInt64Milliseconds(ttl); }

absl::Duration WholeMillis(absl::Duration ttl) {
  return absl::Milliseconds(TtlMillis(ttl));
}

}  // namespace dlock
