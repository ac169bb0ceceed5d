// Internal to //transport/uv: `RedisLink`, the one thing HiredisTransport and
// TlsTransport do differently -- the byte stream of ONE connection attempt
// (hiredis's async context on libuv, or a libuv TCP socket with OpenSSL
// memory BIOs and hiredis's RESP reader) -- and `LinkEvents`, how a link
// reports to the ReconnectingConnection that opened it
// (reconnecting_connection.h), which keeps everything the two share: the
// state machine, the AUTH/SELECT handshake, the in-flight command FIFO.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_REDIS_LINK_H_
#define DLOCK_TRANSPORT_UV_REDIS_LINK_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/reply.h"

namespace dlock {

// Implemented by the connection that owns the link. Called on the loop,
// never inside RedisLink's own methods (constructor and destructor
// included).
class LinkEvents {
 public:
  // The stream is up (TCP connected; for TLS, the handshake is done):
  // commands may be written.
  virtual void OnLinkOpen() = 0;
  // The next reply read, in order (pub/sub messages included).
  virtual void OnLinkReply(Reply reply) = 0;
  // The stream failed or was lost; the owner destroys the link inside this
  // call, so the link must not touch itself after it returns.
  virtual void OnLinkLost(absl::Status why) = 0;
  // The link finished handling one batch of input (outside any hiredis
  // callback): replies collected since are delivered now. May destroy the
  // link, the owner or the whole transport.
  virtual void AfterLinkIo() = 0;
  // Whether replies nobody asked for come on this connection (pub/sub).
  virtual bool PushReplies() const = 0;

 protected:
  ~LinkEvents() = default;
};

class RedisLink {
 public:
  RedisLink() = default;
  RedisLink(const RedisLink&) = delete;
  RedisLink& operator=(const RedisLink&) = delete;
  // Abandons the stream: calls no LinkEvents method, frees what the loop no
  // longer needs (libuv handles in their close callbacks).
  virtual ~RedisLink() = default;

  // Queues one command (any bytes) to go out with the others of this loop
  // turn. False when the stream is already closing.
  virtual bool Write(absl::Span<const absl::string_view> argv) = 0;
  // Why an attempt still under way after `limit` failed, naming the phase
  // it was in (connect, TLS handshake, set-up).
  virtual std::string TimeoutMessage(absl::Duration limit) const = 0;
};

// Appends `argv` to `out` as one RESP command: an array of bulk strings,
// the bytes redisFormatCommandArgv makes, but into the caller's buffer (a
// reused buffer keeps its capacity, so formatting stops allocating).
inline void AppendCommand(absl::Span<const absl::string_view> argv, std::string* out) {
  size_t size = 16;
  for (absl::string_view a : argv) size += a.size() + 24;
  out->reserve(out->size() + size);
  out->push_back('*');
  const absl::AlphaNum count(argv.size());
  out->append(count.data(), count.size());
  out->append("\r\n");
  for (absl::string_view a : argv) {
    const absl::AlphaNum len(a.size());
    out->push_back('$');
    out->append(len.data(), len.size());
    out->append("\r\n");
    out->append(a.data(), a.size());
    out->append("\r\n");
  }
}

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_REDIS_LINK_H_
