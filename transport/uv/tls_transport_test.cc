// Tests of TlsTransport against a TLS redis-server with a throw-away CA
// (tls_test_server.h). Every test ends with uv_loop_close() == 0.
#include "dlock/transport/uv/tls_transport.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/transport_contract_suite.h"
#include "dlock/transport/uv/tls_test_server.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"
#include "dlock/transport/uv/uv_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::StatusIs;
using ::dlock::test_support::TlsTestServer;
using ::dlock::test_support::TlsTestServerOptions;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kLong = absl::Seconds(10);

// The server and transport of TlsTransportTest and of the transport
// contract (transport_contract_suite.h) over TLS.
struct TlsKind {
  using Server = TlsTestServer;
  using ServerOptions = TlsTestServerOptions;
  using Transport = TlsTransport;
  using Options = TlsTransportOptions;
  static absl::StatusOr<std::unique_ptr<TlsTestServer>> Start(TlsTestServerOptions options) {
    return TlsTestServer::Start(std::move(options));
  }
  static test_support::RedisServer& Data(TlsTestServer& s) { return s.server(); }
  static TlsTransportOptions DefaultOptions(TlsTestServer& server) {
    TlsTransportOptions o;
    o.connection.host = "localhost";
    o.connection.port = server.tls_port();
    o.connection.reconnect_backoff_min = absl::Milliseconds(10);
    o.connection.reconnect_backoff_max = absl::Milliseconds(100);
    o.tls = server.client_tls();
    return o;
  }
  static absl::StatusOr<std::unique_ptr<TlsTransport>> Create(uv_loop_t* loop,
                                                              TlsTransportOptions options) {
    return TlsTransport::Create(loop, std::move(options));
  }
};

class TlsTransportTest : public test_support::UvTransportFixture<TlsKind> {
 protected:
  // A new transport with `options`: the outcome of its first attempt.
  absl::Status ConnectWith(TlsTransportOptions options) {
    auto t = TlsTransport::Create(loop_.get(), std::move(options));
    if (!t.ok()) return t.status();
    absl::Status s = ConnectAndWait(**t);
    (*t)->Close();
    return s;
  }
};

TEST_F(TlsTransportTest, CommandsRoundTripOverTls) {
  MakeTransport(Options());
  EXPECT_THAT(Call({"SET", "k", "v"}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(Call({"GET", "k"}), IsOkAndHolds(Reply::String("v")));
  EXPECT_THAT(Call({"GET", "missing"}), IsOkAndHolds(Reply::Nil()));
  EXPECT_THAT(Call({"RPUSH", "list", "a", "b"}), IsOkAndHolds(Reply::Integer(2)));
  EXPECT_THAT(Call({"LRANGE", "list", "0", "-1"}),
              IsOkAndHolds(Reply::Array({Reply::String("a"), Reply::String("b")})));
  absl::StatusOr<Reply> err = Call({"GET", "list"});
  ASSERT_THAT(err, IsOk());
  EXPECT_TRUE(err->IsErrorWithPrefix("WRONGTYPE")) << *err;
  const std::string key("k\0e\r\ny", 6);
  std::string value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
  EXPECT_THAT(Call({"SET", key, value}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(server_->server().Command({"GET", key}), IsOkAndHolds(Reply::String(value)));
  // A value larger than one TLS record and one read.
  const std::string big(300 * 1024, 'x');
  EXPECT_THAT(Call({"SET", "big", big}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(Call({"GET", "big"}), IsOkAndHolds(Reply::String(big)));
  EXPECT_THAT(transport_->Send({"SUBSCRIBE", "x"}, kLong, [](absl::StatusOr<Reply>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TlsTransportTest, ConnectsByIpAddressInTheCertificate) {
  TlsTransportOptions o = Options();
  o.connection.host = "127.0.0.1";
  EXPECT_THAT(ConnectWith(o), IsOk());
}

TEST_F(TlsTransportTest, ServerRestartFailsPendingCommandsAndReconnects) {
  MakeTransport(Options());
  ASSERT_THAT(Call({"SET", "k", "v"}), IsOk());
  const uint64_t first = transport_->connection_epoch();
  EXPECT_NE(first, 0u);
  ASSERT_THAT(server_->server().Pause(), IsOk());
  std::vector<absl::Status> results;
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(transport_->Send({"INCR", "n"}, kLong,
                                 [&](absl::StatusOr<Reply> r) { results.push_back(r.status()); }),
                IsOk());
  }
  loop_.RunFor(absl::Milliseconds(20));  // written, unanswered
  ASSERT_THAT(server_->server().Kill(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return results.size() == 3; }));
  for (const absl::Status& s : results) EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(transport_->connected());
  EXPECT_EQ(transport_->connection_epoch(), 0u);
  ASSERT_THAT(server_->server().Restart(), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return transport_->connected(); }));
  EXPECT_THAT(Call({"SET", "k", "w"}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_NE(transport_->connection_epoch(), first);
}

TEST_F(TlsTransportTest, AuthAclAndSelect) {
  StartServer({.extra_args = {"--user", "alice", "on", ">apw", "~*", "&*", "+@all"},
               .password = "secret"});
  TlsTransportOptions o = Options();
  o.connection.password = "secret";
  o.connection.db = 3;
  MakeTransport(o);
  EXPECT_THAT(Call({"SET", "k", "db3"}), IsOkAndHolds(Reply::Status("OK")));
  EXPECT_THAT(server_->server().Command({"SELECT", "3"}), IsOk());
  EXPECT_THAT(server_->server().Command({"GET", "k"}), IsOkAndHolds(Reply::String("db3")));

  o = Options();
  o.connection.username = "alice";
  o.connection.password = "apw";
  EXPECT_THAT(ConnectWith(o), IsOk());
  o.connection.password = "wrong";
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("WRONGPASS")));
}

// ---- Mutual TLS ----------------------------------------------------------

TEST_F(TlsTransportTest, MutualTlsNeedsAClientCertificateFromTheServersCa) {
  StartServer({.require_client_cert = true});
  TlsTransportOptions o = Options();
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable,
                                       HasSubstr("requires a client certificate")));
  o.tls.cert_file = server_->file("other-client.pem");
  o.tls.key_file = server_->file("other-client.key");
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable,
                                       HasSubstr("refused the client certificate")));
  o.tls.cert_file = server_->file("client.pem");
  o.tls.key_file = server_->file("client.key");
  EXPECT_THAT(ConnectWith(o), IsOk());
}

// ---- Each failure names its reason ---------------------------------------

TEST_F(TlsTransportTest, CertificateFromAnotherCaIsRefusedAsUnknownCa) {
  TlsTransportOptions o = Options();
  o.tls.ca_file = server_->file("other-ca.pem");
  EXPECT_THAT(ConnectWith(o),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("certificate verify failed"), HasSubstr("unknown CA"))));
}

TEST_F(TlsTransportTest, SystemStoreDoesNotTrustTheTestCa) {
  TlsTransportOptions o = Options();
  o.tls.ca_file.clear();  // the system's default store
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("unknown CA")));
}

TEST_F(TlsTransportTest, WrongHostNameIsRefused) {
  TlsTransportOptions o = Options();
  o.tls.server_name = "not-the-server.example";
  EXPECT_THAT(ConnectWith(o),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("does not match"), HasSubstr("not-the-server.example"))));
  // An explicit server name the certificate carries is accepted.
  o.connection.host = "127.0.0.1";
  o.tls.server_name = "localhost";
  EXPECT_THAT(ConnectWith(o), IsOk());
}

TEST_F(TlsTransportTest, ExpiredCertificateIsRefused) {
  StartServer({.expired_certificate = true});
  EXPECT_THAT(ConnectWith(Options()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("has expired")));
}

TEST_F(TlsTransportTest, InsecureSkipVerifyAcceptsAnyCertificate) {
  TlsTransportOptions o = Options();
  o.tls.ca_file = server_->file("other-ca.pem");
  o.tls.server_name = "not-the-server.example";
  o.tls.insecure_skip_verify = true;
  EXPECT_THAT(ConnectWith(o), IsOk());
}

TEST_F(TlsTransportTest, HandshakeTimeoutIsNamed) {
  // A listener that accepts (the kernel does) and never answers.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  TlsTransportOptions o = Options();
  o.connection.port = ntohs(addr.sin_port);
  o.connection.connect_timeout = absl::Milliseconds(300);
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable,
                                       AllOf(HasSubstr("TLS handshake"), HasSubstr("timed out"))));
  close(fd);
}

TEST_F(TlsTransportTest, PlainServerOnTheTlsPortIsNamed) {
  TlsTransportOptions o = Options();
  o.connection.port = server_->server().port();  // the plain port
  o.connection.connect_timeout = absl::Seconds(2);
  // Redis answers the ClientHello in plain text, or (when the hello holds no
  // newline) not at all: both name the likely cause.
  EXPECT_THAT(ConnectWith(o), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("TLS port")));
}

// redis:// to a TLS port: the plain transport's TCP connection succeeds and
// the server drops it at the first command (OpenSSL reads no TLS record).
// The library reports the lost connection; `dlock check` names the cause.
TEST_F(TlsTransportTest, TlsServerOnThePlainTransportFailsTheCommand) {
  UvTransportOptions o;
  o.connection.host = "127.0.0.1";
  o.connection.port = server_->tls_port();
  o.connection.connect_timeout = absl::Seconds(2);
  auto t = UvTransport::Create(loop_.get(), o);
  ASSERT_THAT(t, IsOk());
  EXPECT_FALSE((*t)->tls());
  std::optional<absl::StatusOr<Reply>> r;
  ASSERT_THAT((*t)->Send({"PING"}, absl::Seconds(2),
                         [&](absl::StatusOr<Reply> x) { r = std::move(x); }),
              IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return r.has_value(); }));
  EXPECT_THAT(*r, StatusIs(absl::StatusCode::kUnavailable));
  (*t)->Close();
}

TEST_F(TlsTransportTest, BadFilesAreInvalidArguments) {
  TlsTransportOptions o = Options();
  o.tls.ca_file = server_->file("missing.pem");
  EXPECT_THAT(TlsTransport::Create(loop_.get(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing.pem")));
  o = Options();
  o.tls.cert_file = server_->file("client.pem");
  EXPECT_THAT(TlsTransport::Create(loop_.get(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("go together")));
  o.tls.key_file = server_->file("other-client.key");
  EXPECT_THAT(TlsTransport::Create(loop_.get(), o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("other-client.key"), HasSubstr("match"))));
  o = Options();
  o.connection.unix_socket = "/tmp/x.sock";
  EXPECT_THAT(TlsTransport::Create(loop_.get(), o),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(TlsTransportTest, UrlMakesATlsTransport) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(server_->url(), nullptr);
  ASSERT_THAT(url, IsOk());
  auto t = UvTransport::Create(loop_.get(), TransportOptionsForUrl(*url, server_->client_tls()));
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE((*t)->tls());
  std::optional<absl::Status> up;
  ASSERT_THAT((*t)->Connect([&](absl::Status s) { up = s; }), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return up.has_value(); }));
  EXPECT_THAT(*up, IsOk());
  (*t)->Close();
}

}  // namespace

namespace test_support {
INSTANTIATE_TYPED_TEST_SUITE_P(Tls, TransportContractTest, ::testing::Types<TlsKind>);
}  // namespace test_support
}  // namespace dlock
