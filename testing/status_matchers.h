// This header defines gtest matchers for absl::Status and absl::StatusOr<T>:
// `IsOk()`, `StatusIs(code)`, `IsOkAndHolds(matcher)`. Abseil 20220623 has
// none (absl_testing::StatusIs arrived in 20240722); these keep its names.
//
// Tests check codes, not message text.
#ifndef DLOCK_TESTING_STATUS_MATCHERS_H_
#define DLOCK_TESTING_STATUS_MATCHERS_H_

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace dlock {
namespace test_support {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P(StatusIs, code,
          std::string("has code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

// StatusIs(code, message_matcher): the code, and a message that matches.
MATCHER_P2(StatusIs, code, message,
           std::string("has code ") + absl::StatusCodeToString(code) +
               " and a matching message") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message)(std::string(s.message()));
}

MATCHER_P(IsOkAndHolds, inner, "is OK and holds a value that matches") {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(inner, *arg, result_listener);
}

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_STATUS_MATCHERS_H_
