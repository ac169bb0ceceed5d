// Internal to //transport/uv:tls_transport: how TlsTransport names a TLS
// failure. OpenSSL reports "certificate verify failed" or an alert number;
// the user needs to know which of the usual mistakes it was (unknown CA,
// name mismatch, expired, a server that wants a client certificate, a plain
// port) and which flag or option fixes it.
#ifndef DLOCK_TRANSPORT_UV_TLS_ERRORS_H_
#define DLOCK_TRANSPORT_UV_TLS_ERRORS_H_

#include <openssl/ssl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {
namespace tls_internal {

// The oldest error on OpenSSL's queue (and clears the queue).
std::string OpenSslError();

// The failure of the SSL call that returned `ret` on `ssl` (null: no session
// yet) `during` ("handshake", "read", "write"), with `where` the server's
// endpoint and `name` the name its certificate must carry: kUnavailable
// saying what went wrong and how to fix it. Clears OpenSSL's error queue.
absl::Status NameTlsFailure(SSL* ssl, int ret, absl::string_view during,
                            const std::string& where, const std::string& name,
                            const TlsOptions& tls);

}  // namespace tls_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_ERRORS_H_
