#include "transport/transport.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace consumer {

std::string ShippingLabel(const Shipment& shipment) {
  return absl::StrCat("order ", shipment.order_id, " via ", shipment.carrier);
}

}  // namespace consumer
