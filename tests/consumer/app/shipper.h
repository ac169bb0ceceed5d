// The consumer's order shipper: ships an order at most once at a time across
// all its processes, by holding the order's dlock lock while it ships.
// Written against dlock's `Lock` interface only, so production code passes a
// SimpleLock over HiredisTransport and the unit test a SimpleLock over
// dlock's in-memory fake.
//
// Not thread-safe: call on the loop's thread.
#ifndef CONSUMER_APP_SHIPPER_H_
#define CONSUMER_APP_SHIPPER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dlock/lock/lock.h"
#include "transport/transport.h"

namespace consumer {

class Shipper {
 public:
  // `lock` must outlive the Shipper and its operations.
  explicit Shipper(dlock::Lock* lock) : lock_(lock) {}

  // Ships `shipment` under its order's lock. `done` gets OK (shipped;
  // the label is in shipped()), kAborted (another process holds the order),
  // or the lock's error.
  void Ship(const Shipment& shipment, std::function<void(absl::Status)> done);

  const std::vector<std::string>& shipped() const { return shipped_; }

 private:
  dlock::Lock* lock_;
  std::vector<std::string> shipped_;
};

}  // namespace consumer

#endif  // CONSUMER_APP_SHIPPER_H_
