// HiredisTransport: creation, and hiredis's async context as the byte
// stream of each connection attempt (hiredis_link.cc). Everything else --
// the connection state machine, commands, pub/sub, Close -- is
// ReconnectingTransport's (reconnecting_transport.h).
#include "dlock/transport/uv/hiredis_transport.h"

#include <memory>
#include <utility>

#include "hiredis_link.h"  // private, same directory

namespace dlock {

absl::StatusOr<std::unique_ptr<HiredisTransport>> HiredisTransport::Create(
    uv_loop_s* loop, HiredisTransportOptions options) {
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (absl::Status s = ValidateConnectionOptions(options); !s.ok()) return s;
  auto t = std::unique_ptr<HiredisTransport>(new HiredisTransport(loop, options));
  t->Start();
  return t;
}

HiredisTransport::~HiredisTransport() { Close(); }

absl::StatusOr<std::unique_ptr<RedisLink>> HiredisTransport::OpenLink(
    const std::string& address, LinkEvents* events) {
  return HiredisLink::Open(loop(), options(), address, endpoint(), events);
}

}  // namespace dlock
