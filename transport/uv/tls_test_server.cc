#include "dlock/transport/uv/tls_test_server.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dlock {
namespace test_support {
namespace {

absl::Status Run(const std::string& dir, const std::string& cmd) {
  const std::string full =
      absl::StrCat("cd '", dir, "' && ", cmd, " >>openssl.log 2>&1");
  int rc = std::system(full.c_str());
  if (rc != 0) {
    std::ifstream log(dir + "/openssl.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    return absl::InternalError(absl::StrCat("`", cmd, "` failed (", rc, "): ", text));
  }
  return absl::OkStatus();
}

constexpr char kNewKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

absl::Status MakeCa(const std::string& dir, const std::string& name) {
  return Run(dir, absl::StrCat(
                      "openssl req -x509 ", kNewKey, " -keyout ", name, ".key -out ", name,
                      ".pem -days 2 -subj /CN=dlock-test-", name,
                      " -addext basicConstraints=critical,CA:TRUE"
                      " -addext keyUsage=critical,keyCertSign,cRLSign"));
}

absl::Status MakeLeaf(const std::string& dir, const std::string& name, const std::string& ca,
                      const std::string& cn, const std::string& ext, int days) {
  {
    std::ofstream f(dir + "/" + name + ".ext");
    f << ext << "\n";
  }
  absl::Status s = Run(dir, absl::StrCat("openssl req -new ", kNewKey, " -keyout ", name,
                                         ".key -out ", name, ".csr -subj /CN=", cn));
  if (!s.ok()) return s;
  return Run(dir, absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca,
                               ".pem -CAkey ", ca, ".key -CAcreateserial -out ", name,
                               ".pem -days ", days, " -extfile ", name, ".ext"));
}

}  // namespace

absl::Status MakeTestCertificates(const std::string& dir) {
  const std::string server_ext =
      "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth";
  const std::string client_ext = "extendedKeyUsage=clientAuth";
  for (absl::Status s : {MakeCa(dir, "ca"), MakeCa(dir, "other-ca")}) {
    if (!s.ok()) return s;
  }
  absl::Status s = MakeLeaf(dir, "server", "ca", "localhost", server_ext, 2);
  if (s.ok()) s = MakeLeaf(dir, "expired", "ca", "localhost", server_ext, -1);
  if (s.ok()) s = MakeLeaf(dir, "client", "ca", "dlock-client", client_ext, 2);
  if (s.ok()) s = MakeLeaf(dir, "other-client", "other-ca", "dlock-client", client_ext, 2);
  return s;
}

absl::StatusOr<int> FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("bind/getsockname");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

absl::StatusOr<std::unique_ptr<TlsTestServer>> TlsTestServer::Start(
    TlsTestServerOptions options) {
  std::unique_ptr<TlsTestServer> t(new TlsTestServer());
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/tls-XXXXXX");
  if (mkdtemp(&tmpl[0]) == nullptr) return absl::InternalError("mkdtemp");
  t->dir_ = tmpl;
  absl::Status s = MakeTestCertificates(t->dir_);
  if (!s.ok()) return s;
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  t->tls_port_ = *port;
  RedisServerOptions o;
  o.password = options.password;
  const std::string cert = options.expired_certificate ? "expired" : "server";
  o.extra_args = {"--tls-port", absl::StrCat(t->tls_port_),
                  "--tls-cert-file", t->file(cert + ".pem"),
                  "--tls-key-file", t->file(cert + ".key"),
                  "--tls-ca-cert-file", t->file("ca.pem"),
                  "--tls-auth-clients", options.require_client_cert ? "yes" : "no"};
  for (std::string& a : options.extra_args) o.extra_args.push_back(std::move(a));
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(o);
  if (!server.ok()) return server.status();
  t->server_ = *std::move(server);
  return t;
}

std::string TlsTestServer::url() const {
  return absl::StrCat("rediss://localhost:", tls_port_);
}

TlsOptions TlsTestServer::client_tls() const {
  TlsOptions o;
  o.ca_file = file("ca.pem");
  return o;
}

}  // namespace test_support
}  // namespace dlock
