// Internal state of `TlsTransport`, shared by its three source files:
// tls_transport.cc (creation, the command path, deadlines, Close, pub/sub),
// tls_connection.cc (the connection state machine: resolve, connect,
// AUTH/SELECT/PING set-up, ready, failure, backoff, reconnect) and
// tls_session.cc (the TLS stream on a connected socket: handshake, bytes
// in and out), over tls_stream.cc (one OpenSSL session in memory) and
// tls_errors.cc (naming TLS failures).
// Private to //transport/uv:tls_transport.
#ifndef DLOCK_TRANSPORT_UV_TLS_TRANSPORT_INTERNAL_H_
#define DLOCK_TRANSPORT_UV_TLS_TRANSPORT_INTERNAL_H_

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/host_lookup.h"
#include "dlock/transport/uv/tls_transport.h"
#include "tls_stream.h"  // private, same directory

namespace dlock {
namespace tls_internal {

constexpr size_t kReadChunk = 64 * 1024;

// The RESP encoding of `argv` (hiredis's formatter). In tls_transport.cc.
std::string FormatCommand(const std::vector<std::string>& argv);

}  // namespace tls_internal

// One command, from Send to its callback.
struct TlsTransport::Request {
  ReplyCallback callback;  // empty once delivered (deadline)
  TimerId timer = 0;
  std::string wire;        // the formatted command, until written
};

// One TCP + TLS stream. Freed by its uv close callback; `conn` is null once
// the transport let go of it.
struct TlsTransport::Link {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  Conn* conn = nullptr;
  std::unique_ptr<tls_internal::TlsStream> stream;  // once TCP is up
  char buf[tls_internal::kReadChunk];
};

struct TlsTransport::Conn {
  enum class State { kIdle, kConnecting, kReady, kBackoff };
  enum class Phase { kResolve, kTcp, kHandshake, kSetup };
  Conn(TlsTransport* owner, bool pubsub) : owner(owner), pubsub(pubsub) {}
  TlsTransport* const owner;
  const bool pubsub;
  State state = State::kIdle;
  Phase phase = Phase::kResolve;
  Link* link = nullptr;
  std::unique_ptr<HostLookup> lookup;  // while the host name resolves
  TimerId attempt_timer = 0;
  TimerId retry_timer = 0;
  TimerId flush_timer = 0;
  int failures = 0;
  absl::Status last_error;
  absl::Time ready_at;
  bool saw_first_byte = false;
  int setup_replies = 0;  // AUTH/SELECT/PING replies still expected
  std::string out_plain;  // commands waiting for the next flush
  std::deque<std::unique_ptr<Request>> inflight;  // command conn: in order
  std::deque<std::string> pending_subscribes;     // pub/sub: SUBSCRIBE sent
};

struct TlsTransport::Channel {
  std::vector<uint64_t> subscribers;
  bool confirmed = false;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_TRANSPORT_INTERNAL_H_
