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

// The pointer/length arrays that hiredis's argv functions take
// (redisAsyncCommandArgv, redisFormatCommandArgv), on the stack for the
// usual short command, so that hiredis formats the protocol straight from
// the caller's bytes.
class ArgvArrays {
 public:
  explicit ArgvArrays(absl::Span<const absl::string_view> argv) : argc_(argv.size()) {
    if (argc_ > kInline) {
      ptrs_heap_.reset(new const char*[argc_]);
      lens_heap_.reset(new size_t[argc_]);
      ptrs_ = ptrs_heap_.get();
      lens_ = lens_heap_.get();
    }
    for (size_t i = 0; i < argc_; ++i) {
      ptrs_[i] = argv[i].data();
      lens_[i] = argv[i].size();
    }
  }
  ArgvArrays(const ArgvArrays&) = delete;
  ArgvArrays& operator=(const ArgvArrays&) = delete;
  int argc() const { return static_cast<int>(argc_); }
  const char** ptrs() { return ptrs_; }
  const size_t* lens() const { return lens_; }

 private:
  static constexpr size_t kInline = 16;
  const size_t argc_;
  const char* ptrs_inline_[kInline];
  size_t lens_inline_[kInline];
  std::unique_ptr<const char*[]> ptrs_heap_;
  std::unique_ptr<size_t[]> lens_heap_;
  const char** ptrs_ = ptrs_inline_;
  size_t* lens_ = lens_inline_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_REDIS_LINK_H_
