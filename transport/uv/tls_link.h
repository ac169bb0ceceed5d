// Internal to //transport/uv:tls_transport: `TlsLink`, the RedisLink of
// TlsTransport (redis_link.h): a libuv TCP socket carrying one TLS session
// (TlsStream, tls_stream.h: OpenSSL over memory BIOs, hiredis's RESP reader).
// It connects, drives the handshake, names what went wrong (a plain-text
// server, a refused certificate, a handshake that timed out), and moves the
// bytes: commands written in one loop turn go out in one TLS write.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_TLS_LINK_H_
#define DLOCK_TRANSPORT_UV_TLS_LINK_H_

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/uv/redis_link.h"
#include "dlock/transport/uv/tls_transport.h"
#include "tls_stream.h"  // private, same directory

struct uv_loop_s;

namespace dlock {
namespace tls_internal {

class TlsLink : public RedisLink {
 public:
  // What every link of one transport shares; must outlive the links.
  struct Config {
    uv_loop_s* loop;
    EventLoop* timers;  // the zero-delay flush timer
    SSL_CTX* ctx;
    const TlsTransportOptions* options;
    const std::string* endpoint;
  };
  // Starts a TCP connect to `ip`:port; kUnavailable when libuv refuses at
  // once. `events` must outlive the link.
  static absl::StatusOr<std::unique_ptr<RedisLink>> Open(const Config& config,
                                                         const std::string& ip,
                                                         LinkEvents* events);
  // Closes the socket (freed in libuv's close callback); never calls back.
  ~TlsLink() override;

  bool Write(absl::Span<const absl::string_view> argv) override;
  std::string TimeoutMessage(absl::Duration limit) const override;

 private:
  enum class Phase { kTcp, kHandshake, kSetup };
  struct Socket;

  TlsLink(const Config& config, LinkEvents* events) : c_(config), events_(events) {}
  void OnTcpConnected(int status);
  void OnRead(const char* data, size_t len);
  void OnEof(int status);
  void DriveHandshake();
  void ReadPlaintext();
  void Flush();
  // Writes the ciphertext OpenSSL produced. False when that failed (the
  // link is gone then).
  bool FlushCipher();
  // Reports `why` to the owner, which destroys this link inside the call.
  void Fail(absl::Status why) { events_->OnLinkLost(std::move(why)); }

  const Config c_;
  LinkEvents* const events_;
  Socket* socket_ = nullptr;  // outlives the link until libuv closes it
  std::unique_ptr<TlsStream> stream_;  // once TCP is up
  Phase phase_ = Phase::kTcp;
  bool saw_first_byte_ = false;
  std::string out_plain_;  // commands waiting for the next flush
  TimerId flush_timer_ = 0;
};

}  // namespace tls_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_LINK_H_
