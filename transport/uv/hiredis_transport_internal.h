// Internal state of `HiredisTransport`, shared by its three source files:
// hiredis_transport.cc (creation, the command path, deadlines, Close),
// hiredis_connection.cc (the connection state machine) and
// hiredis_pubsub.cc (pub/sub). Private to //transport/uv:hiredis_transport.
#ifndef DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_INTERNAL_H_
#define DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_INTERNAL_H_

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/host_lookup.h"

struct redisAsyncContext;

namespace dlock {

// One command: its callback (the one heap allocation per command on the
// transport's side), its result once known, and its links into one
// RequestQueue (reply FIFO, waiting queue or ready list) and the deadline
// list.
struct HiredisTransport::Request : DeadlineNode {
  ReplyCallback callback;
  absl::StatusOr<Reply> result;   // set when answered
  std::vector<std::string> argv;  // kept only while waiting for a connection
  Request* next = nullptr;        // RequestQueue link
  bool done = false;         // callback delivered (e.g. timed out)
  bool internal = false;     // AUTH / SELECT of the handshake
  const char* internal_name = "";
};

inline HiredisTransport::RequestQueue::~RequestQueue() {
  while (!empty()) pop_front();
}

inline void HiredisTransport::RequestQueue::push_back(std::unique_ptr<Request> r) {
  Request* raw = r.release();
  raw->next = nullptr;
  if (tail_ == nullptr) {
    head_ = tail_ = raw;
  } else {
    tail_->next = raw;
    tail_ = raw;
  }
}

inline std::unique_ptr<HiredisTransport::Request> HiredisTransport::RequestQueue::pop_front() {
  Request* r = head_;
  if (r == nullptr) return nullptr;
  head_ = r->next;
  if (head_ == nullptr) tail_ = nullptr;
  r->next = nullptr;
  return std::unique_ptr<Request>(r);
}

inline void HiredisTransport::RequestQueue::swap(RequestQueue& other) {
  std::swap(head_, other.head_);
  std::swap(tail_, other.tail_);
}

// One hiredis context (one connection attempt and, if it succeeds, the
// connection). Deleted when hiredis is done with the context.
struct HiredisTransport::Link {
  Link(HiredisTransport* owner, Conn* conn, uint64_t serial)
      : owner(owner), conn(conn), serial(serial) {}
  HiredisTransport* owner;
  Conn* conn;
  uint64_t serial;
  redisAsyncContext* ac = nullptr;
  std::unique_ptr<HostLookup> lookup;  // while the host name resolves
  RequestQueue fifo;             // sent, in reply order
  bool tearing_down = false;     // we are freeing the context
  absl::Status fail_status;      // for replies cut off by us
  int handshake_left = 0;
  bool handshake_failed = false;
};

// A connection that persists across reconnects: the command connection or
// the pub/sub connection.
struct HiredisTransport::Conn {
  enum class State { kIdle, kConnecting, kReady, kBackoff };
  explicit Conn(bool pubsub) : pubsub(pubsub) {}
  const bool pubsub;
  State state = State::kIdle;
  Link* link = nullptr;
  uint64_t serial = 0;
  int failures = 0;  // consecutive failed attempts and quick losses
  absl::Time ready_since = absl::InfinitePast();
  TimerId attempt_timer = 0;
  TimerId connect_timer = 0;
  absl::Status last_error;
};

struct HiredisTransport::Channel {
  std::vector<uint64_t> subscribers;
  bool confirmed = false;   // the server confirmed on the current connection
  bool sub_sent = false;    // SUBSCRIBE sent, not yet confirmed
  bool unsub_sent = false;  // UNSUBSCRIBE sent, not yet confirmed
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HIREDIS_TRANSPORT_INTERNAL_H_
