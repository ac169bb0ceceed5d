// TlsTransport: creation (options, the SSL_CTX with its CA and client
// certificate) and a TLS session over a libuv socket as the byte stream of
// each connection attempt (tls_link.cc). Everything else -- the connection
// state machine, commands, pub/sub, Close -- is ReconnectingTransport's.
#include "dlock/transport/uv/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tls_errors.h"  // private, same directory
#include "tls_link.h"    // private, same directory

namespace dlock {

using tls_internal::OpenSslError;

absl::StatusOr<std::unique_ptr<TlsTransport>> TlsTransport::Create(
    uv_loop_s* loop, TlsTransportOptions options) {
  const HiredisTransportOptions& c = options.connection;
  if (loop == nullptr) return absl::InvalidArgumentError("null uv loop");
  if (!c.unix_socket.empty()) {
    return absl::InvalidArgumentError("TLS needs host:port, not a unix socket");
  }
  if (absl::Status s = ValidateConnectionOptions(c); !s.ok()) return s;
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS client certificate and key go together (--tls-cert and --tls-key)");
  }

  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("SSL_CTX_new: ", OpenSslError()));
  }
  auto fail = [ctx](absl::string_view what, const std::string& file) {
    std::string why = OpenSslError();
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot load ", what, " \"", file, "\": ", why));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
  if (!tls.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!tls.ca_file.empty() || !tls.ca_dir.empty()) {
      if (SSL_CTX_load_verify_locations(
              ctx, tls.ca_file.empty() ? nullptr : tls.ca_file.c_str(),
              tls.ca_dir.empty() ? nullptr : tls.ca_dir.c_str()) != 1) {
        return fail("CA certificates",
                    tls.ca_file.empty() ? tls.ca_dir : tls.ca_file);
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return fail("the system CA store", "default");
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
      return fail("client certificate", tls.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("client key (does it match the certificate?)", tls.key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail("client key (does not match the certificate)", tls.key_file);
    }
  }
  auto t = std::unique_ptr<TlsTransport>(new TlsTransport(loop, std::move(options), ctx));
  t->Start();
  return t;
}

TlsTransport::TlsTransport(uv_loop_s* loop, TlsTransportOptions options, ssl_ctx_st* ctx)
    : ReconnectingTransport(loop, options.connection, /*ping_on_setup=*/true),
      options_(std::move(options)),
      ctx_(ctx) {}

TlsTransport::~TlsTransport() {
  Close();  // the links' sessions go before their SSL_CTX
  SSL_CTX_free(ctx_);
}

absl::StatusOr<std::unique_ptr<RedisLink>> TlsTransport::OpenLink(const std::string& address,
                                                                  LinkEvents* events) {
  return tls_internal::TlsLink::Open({loop(), &timers(), ctx_, &options_, &endpoint()},
                                     address, events);
}

}  // namespace dlock
