#include "dlock/tests/env/tls_env.h"

#include <utility>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "dlock/transport/uv/tls_transport.h"

namespace dlock {
namespace test_support {

TlsRedis::TlsRedis() {
  absl::StatusOr<std::unique_ptr<TlsTestServer>> server = TlsTestServer::Start();
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    return;
  }
  server_ = *std::move(server);
}

absl::StatusOr<std::unique_ptr<Transport>> TlsRedis::NewTransport(uv_loop_t* loop) {
  TlsTransportOptions options;
  options.connection.host = "localhost";
  options.connection.port = server_ != nullptr ? server_->tls_port() : 1;
  if (server_ != nullptr) options.tls = server_->client_tls();
  return TlsTransport::Create(loop, options);
}

absl::StatusOr<Reply> TlsRedis::Command(std::vector<std::string> argv) {
  if (server_ == nullptr) return absl::FailedPreconditionError("no server");
  return server_->server().Command(std::move(argv));
}

}  // namespace test_support
}  // namespace dlock
