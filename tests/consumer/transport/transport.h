// The consumer's OWN transport module (it ships orders), at the same path as
// dlock's transport/transport.h, which is included as
// "dlock/transport/transport.h" and so never collides with this one.
#ifndef CONSUMER_TRANSPORT_TRANSPORT_H_
#define CONSUMER_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <string>

namespace consumer {

struct Shipment {
  int64_t order_id = 0;
  std::string carrier;
};

// "order <id> via <carrier>".
std::string ShippingLabel(const Shipment& shipment);

}  // namespace consumer

#endif  // CONSUMER_TRANSPORT_TRANSPORT_H_
