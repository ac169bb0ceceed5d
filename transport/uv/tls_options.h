// This header defines `TlsOptions`, how a TlsTransport (tls_transport.h)
// checks the server and proves who the client is. A plain value type with
// no OpenSSL in it, so URL handling (redis_url.h) can carry it.
//
// Defaults are the safe ones: the server certificate must chain to a
// trusted CA (the system store, unless `ca_file`/`ca_dir` is set), must name
// the host (`server_name`, else the URL's host: a DNS name or an IP
// address), and the connection uses TLS 1.2 or newer. SNI carries the
// server name when it is a DNS name.
#ifndef DLOCK_TRANSPORT_UV_TLS_OPTIONS_H_
#define DLOCK_TRANSPORT_UV_TLS_OPTIONS_H_

#include <string>

namespace dlock {

struct TlsOptions {
  // PEM file of trusted CA certificates and/or a directory of hashed CA
  // certificates (c_rehash). Both empty: the system's default store.
  std::string ca_file;
  std::string ca_dir;
  // Client certificate and its private key (PEM), for servers that require
  // mutual TLS (redis-server --tls-auth-clients yes). Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server certificate must carry (and the SNI sent); empty:
  // the host being connected to.
  std::string server_name;
  // DANGEROUS: accept any server certificate (no chain, no name check): the
  // connection is encrypted but anyone in the middle can read it. For
  // throw-away test set-ups only; `dlock check` warns when it is on.
  bool insecure_skip_verify = false;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_TLS_OPTIONS_H_
