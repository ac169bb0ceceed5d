// This header defines `StartAcquire` and `Pending`, for tests that start an
// acquire on a `dlock::Lock`, drive the loop themselves and look at the
// result when it has come: the result lands in a shared slot that holds
// UNKNOWN "pending" until the callback ran.
#ifndef DLOCK_TESTING_ACQUIRE_RESULT_H_
#define DLOCK_TESTING_ACQUIRE_RESULT_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/lock.h"
#include "dlock/testing/status_matchers.h"

namespace dlock {
namespace test_support {

// Where an acquire's result lands.
using AcquireResult = std::shared_ptr<absl::StatusOr<Lease>>;

// Starts `lock.Acquire(resource, options)`; its handle goes to `*handle`
// when given. A call the lock refuses at once is a test failure (and its
// slot stays pending).
inline AcquireResult StartAcquire(Lock& lock, absl::string_view resource,
                                  AcquireOptions options, AcquireHandle* handle = nullptr) {
  auto out = std::make_shared<absl::StatusOr<Lease>>(absl::UnknownError("pending"));
  absl::StatusOr<AcquireHandle> h =
      lock.Acquire(resource, options, [out](absl::StatusOr<Lease> r) { *out = std::move(r); });
  EXPECT_THAT(h, IsOk());
  if (handle != nullptr && h.ok()) *handle = *h;
  return out;
}

// Whether the acquire behind `r` has not called back yet.
inline bool Pending(const AcquireResult& r) { return absl::IsUnknown(r->status()); }

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_ACQUIRE_RESULT_H_
