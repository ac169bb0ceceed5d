#include "lock/lock.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace consumer {

std::string OrderResource(int64_t order_id) {
  return absl::StrCat("order:", order_id);
}

std::string Describe(const dlock::Lease& lease) {
  return absl::StrCat(lease.resource, " fence=", lease.fence,
                      " ttl=", absl::FormatDuration(lease.ttl));
}

}  // namespace consumer
