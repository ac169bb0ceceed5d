#include "app/shipper.h"

#include <functional>
#include <string>
#include <utility>

#include "lock/lock.h"

namespace consumer {

void Shipper::Ship(const Shipment& shipment, std::function<void(absl::Status)> done) {
  dlock::AcquireOptions options;
  options.ttl = absl::Seconds(10);
  absl::StatusOr<dlock::AcquireHandle> handle = lock_->Acquire(
      OrderResource(shipment.order_id), options,
      [this, shipment, done](absl::StatusOr<dlock::Lease> lease) {
        if (!lease.ok()) return done(lease.status());
        shipped_.push_back(ShippingLabel(shipment) + " [" + Describe(*lease) + "]");
        absl::Status s = lock_->Release(*lease, [done](absl::Status released) {
          done(released);
        });
        if (!s.ok()) done(s);
      });
  if (!handle.ok()) done(handle.status());
}

}  // namespace consumer
