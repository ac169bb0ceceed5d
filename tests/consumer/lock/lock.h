// The consumer's OWN lock helpers. This file deliberately has the same path
// as dlock's lock/lock.h: dlock's public headers are included as
// "dlock/lock/lock.h", so `#include "lock/lock.h"` here always means this
// file, and nothing in dlock ever picks this one up by mistake (if it did, it
// would not compile: this header declares nothing dlock expects).
#ifndef CONSUMER_LOCK_LOCK_H_
#define CONSUMER_LOCK_LOCK_H_

#include <cstdint>
#include <string>

#include "dlock/lock/lock.h"

namespace consumer {

// The lock resource that guards one order.
std::string OrderResource(int64_t order_id);

// One line describing a lease for logs: resource, fencing token, ttl. Never
// prints the token.
std::string Describe(const dlock::Lease& lease);

}  // namespace consumer

#endif  // CONSUMER_LOCK_LOCK_H_
