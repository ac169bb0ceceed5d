#include "tls_errors.h"  // private, same directory

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace tls_internal {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  std::string out;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    const char* reason = ERR_reason_error_string(e);
    out = reason != nullptr ? reason : buf;
  }
  ERR_clear_error();
  return out.empty() ? "unknown OpenSSL error" : out;
}

absl::Status NameTlsFailure(SSL* ssl, int ret, absl::string_view during,
                            const std::string& where, const std::string& name,
                            const TlsOptions& tls) {
  long v = ssl != nullptr ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (v != X509_V_OK && !tls.insecure_skip_verify) {
    ERR_clear_error();
    switch (v) {
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_UNTRUSTED:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: unknown CA: the certificate of ", where,
            " is not signed by a trusted CA (", X509_verify_cert_error_string(v),
            "; give its CA with --tls-ca-cert / TlsOptions::ca_file)"));
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " does not match the name \"", name,
            "\" (connect by a name it carries, or set --tls-server-name)"));
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " has expired"));
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed: the certificate of ", where,
            " is not valid yet (check the clocks)"));
      default:
        return absl::UnavailableError(absl::StrCat(
            "TLS: certificate verify failed for ", where, ": ",
            X509_verify_cert_error_string(v)));
    }
  }
  int err = ssl != nullptr ? SSL_get_error(ssl, ret) : SSL_ERROR_SSL;
  if (err == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return absl::UnavailableError(
        absl::StrCat("TLS: ", where, " closed the connection ", during));
  }
  std::string reason = OpenSslError();
  if (absl::StrContains(reason, "certificate required") ||
      (absl::StrContains(reason, "handshake failure") && tls.cert_file.empty())) {
    return absl::UnavailableError(absl::StrCat(
        "TLS: ", where, " requires a client certificate (--tls-cert and --tls-key): ",
        reason));
  }
  if (absl::StrContains(reason, "unknown ca") || absl::StrContains(reason, "bad certificate")) {
    return absl::UnavailableError(absl::StrCat(
        "TLS: ", where, " refused the client certificate: ", reason));
  }
  return absl::UnavailableError(absl::StrCat("TLS ", during, " with ", where,
                                             " failed: ", reason));
}

}  // namespace tls_internal
}  // namespace dlock
