// Internal to //transport/uv: `HostLookup`, the name resolution HiredisTransport
// and TlsTransport do on every connection attempt: `host` to ONE address,
// without blocking the loop (uv_getaddrinfo), preferring its first IPv4
// address (servers are often bound to 127.0.0.1 only while "localhost"
// resolves to ::1 first), else its first address. Also `IsIpLiteral`.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_HOST_LOOKUP_H_
#define DLOCK_TRANSPORT_UV_HOST_LOOKUP_H_

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"

struct uv_loop_s;

namespace dlock {

// Whether `host` is an IPv4 or IPv6 address literal (no lookup needed).
bool IsIpLiteral(const std::string& host);

class HostLookup {
 public:
  // `status` is 0 or a libuv error code; `ip` is the address's text, empty
  // when the lookup found no usable address.
  using Done = absl::AnyInvocable<void(int status, std::string ip) &&>;

  // Starts resolving `host` on `loop`. `done` runs once, on the loop, never
  // inside this call, unless the lookup is destroyed first (it then never
  // runs). Returns 0, or the libuv error of uv_getaddrinfo (then `*lookup`
  // is left empty and `done` never runs).
  static int Start(uv_loop_s* loop, const std::string& host, Done done,
                   std::unique_ptr<HostLookup>* lookup);

  HostLookup(const HostLookup&) = delete;
  HostLookup& operator=(const HostLookup&) = delete;
  // Abandons the lookup if it is still running (libuv finishes it; its
  // result is dropped).
  ~HostLookup();

 private:
  struct Request;
  explicit HostLookup(Request* request) : request_(request) {}

  Request* request_;  // null once `done` was called
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HOST_LOOKUP_H_
