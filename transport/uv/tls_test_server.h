// This header defines `TlsTestServer`: a private redis-server that speaks
// TLS, with a throw-away CA made by the `openssl` command in the test's
// temporary directory. For TlsTransport's tests and anything else that must
// run over rediss:// (the CLI test, the lock behaviour suite).
//
// The server listens on a plain port (the fixture's own set-up connection,
// `server()`) and on a TLS port (`tls_port()`, the one under test). Files:
//   ca.pem / ca.key         the CA that signs everything below
//   server.pem / .key       CN=localhost, SAN DNS:localhost, IP:127.0.0.1
//   client.pem / .key       a client certificate (mutual TLS)
//   other-ca.pem            a second CA that signed nothing the server has
//   other-client.pem / .key a client certificate from the other CA
//   expired.pem / .key      like server.pem, expired yesterday
//
// Thread-compatible.
#ifndef DLOCK_TRANSPORT_UV_TLS_TEST_SERVER_H_
#define DLOCK_TRANSPORT_UV_TLS_TEST_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/testing/redis_server.h"
#include "dlock/transport/uv/tls_options.h"

namespace dlock {
namespace test_support {

struct TlsTestServerOptions {
  // --tls-auth-clients yes: the server requires a client certificate signed
  // by ca.pem.
  bool require_client_cert = false;
  // Serve expired.pem instead of server.pem.
  bool expired_certificate = false;
  // More redis-server arguments (e.g. --requirepass, an ACL user).
  std::vector<std::string> extra_args;
  // As RedisServerOptions::password (the set-up connection authenticates).
  std::string password;
};

class TlsTestServer {
 public:
  static absl::StatusOr<std::unique_ptr<TlsTestServer>> Start(
      TlsTestServerOptions options = {});

  int tls_port() const { return tls_port_; }
  // The plain port and set-up connection (Command, Kill, Restart, ...).
  RedisServer& server() { return *server_; }
  // The directory holding the certificate files.
  const std::string& dir() const { return dir_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  // "rediss://localhost:<tls_port>".
  std::string url() const;
  // Trusts ca.pem (no client certificate).
  TlsOptions client_tls() const;

 private:
  TlsTestServer() = default;
  std::string dir_;
  int tls_port_ = 0;
  std::unique_ptr<RedisServer> server_;
};

// Makes the files listed above in `dir` with the openssl command.
absl::Status MakeTestCertificates(const std::string& dir);

// A loopback TCP port nothing listens on right now.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_TEST_SERVER_H_
