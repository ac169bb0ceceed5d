#include "dlock/transport/uv/uv_transport.h"

#include <memory>
#include <utility>

#include "dlock/transport/uv/cluster_uv.h"

namespace dlock {

absl::StatusOr<std::unique_ptr<UvTransport>> UvTransport::Create(
    uv_loop_s* loop, UvTransportOptions options) {
  std::unique_ptr<UvTransport> t(new UvTransport());
  if (options.sentinel) {
    SentinelTransportOptions o;
    for (const RedisUrl::Endpoint& e : options.sentinels) {
      o.sentinels.push_back({e.host, e.port});
    }
    o.master_name = std::move(options.master_name);
    o.sentinel_username = std::move(options.sentinel_username);
    o.sentinel_password = std::move(options.sentinel_password);
    o.master = std::move(options.connection);
    o.tls = options.tls;
    o.tls_options = std::move(options.tls_options);
    absl::StatusOr<std::unique_ptr<SentinelTransport>> sentinel =
        SentinelTransport::Create(loop, std::move(o));
    if (!sentinel.ok()) return sentinel.status();
    t->sentinel_ = *std::move(sentinel);
    t->inner_ = t->sentinel_.get();
  } else if (!options.cluster_seeds.empty()) {
    if (options.tls) {
      return absl::InvalidArgumentError("TLS to a Redis Cluster is not supported");
    }
    ClusterUvOptions o;
    for (auto& [host, port] : options.cluster_seeds) o.cluster.seeds.push_back({host, port});
    o.node = std::move(options.connection);
    absl::StatusOr<std::unique_ptr<ClusterTransport>> c =
        CreateUvClusterTransport(loop, std::move(o));
    if (!c.ok()) return c.status();
    t->cluster_ = *std::move(c);
    t->inner_ = t->cluster_.get();
  } else if (options.tls) {
    TlsTransportOptions o;
    o.connection = std::move(options.connection);
    o.tls = std::move(options.tls_options);
    absl::StatusOr<std::unique_ptr<TlsTransport>> tls = TlsTransport::Create(loop, o);
    if (!tls.ok()) return tls.status();
    t->tls_ = *std::move(tls);
    t->inner_ = t->tls_.get();
  } else {
    absl::StatusOr<std::unique_ptr<HiredisTransport>> plain =
        HiredisTransport::Create(loop, std::move(options.connection));
    if (!plain.ok()) return plain.status();
    t->plain_ = *std::move(plain);
    t->inner_ = t->plain_.get();
  }
  return t;
}

absl::Status UvTransport::Send(std::vector<std::string> argv, absl::Duration timeout,
                               ReplyCallback callback) {
  return inner_->Send(std::move(argv), timeout, std::move(callback));
}

absl::Status UvTransport::SendArgv(absl::Span<const absl::string_view> argv,
                                   absl::Duration timeout, ReplyCallback callback) {
  return inner_->SendArgv(argv, timeout, std::move(callback));
}

absl::Status UvTransport::SendScript(absl::string_view body,
                                     absl::Span<const absl::string_view> evalsha_argv,
                                     absl::Duration timeout, ReplyCallback callback) {
  return inner_->SendScript(body, evalsha_argv, timeout, std::move(callback));
}

absl::Status UvTransport::SendTransaction(
    absl::Span<const absl::Span<const absl::string_view>> commands, absl::Duration timeout,
    ReplyCallback callback) {
  return inner_->SendTransaction(commands, timeout, std::move(callback));
}

absl::StatusOr<std::unique_ptr<Subscription>> UvTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  return inner_->Subscribe(std::move(channel), std::move(on_message),
                           std::move(on_ready));
}

uint64_t UvTransport::connection_epoch() const { return inner_->connection_epoch(); }

absl::Status UvTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  return inner_->Connect(std::move(callback));
}

void UvTransport::Close() { inner_->Close(); }

bool UvTransport::connected() const { return inner_->connected(); }

absl::Status UvTransport::last_error() const {
  if (sentinel_) return sentinel_->last_error();
  if (cluster_) return absl::OkStatus();  // per node; see cluster_transport.h
  return tls_ ? tls_->last_error() : plain_->last_error();
}

size_t UvTransport::pending_commands() const { return inner_->pending_commands(); }

}  // namespace dlock
