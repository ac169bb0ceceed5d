#include "dlock/transport/uv/uv_transport.h"

#include <memory>
#include <utility>

namespace dlock {

absl::StatusOr<std::unique_ptr<UvTransport>> UvTransport::Create(
    uv_loop_s* loop, UvTransportOptions options) {
  std::unique_ptr<UvTransport> t(new UvTransport());
  if (options.tls) {
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

absl::StatusOr<std::unique_ptr<Subscription>> UvTransport::Subscribe(
    std::string channel, MessageCallback on_message,
    absl::AnyInvocable<void(absl::Status) &&> on_ready) {
  return inner_->Subscribe(std::move(channel), std::move(on_message),
                           std::move(on_ready));
}

uint64_t UvTransport::connection_epoch() const { return inner_->connection_epoch(); }

absl::Status UvTransport::Connect(absl::AnyInvocable<void(absl::Status) &&> callback) {
  return tls_ ? tls_->Connect(std::move(callback)) : plain_->Connect(std::move(callback));
}

void UvTransport::Close() { tls_ ? tls_->Close() : plain_->Close(); }

bool UvTransport::connected() const {
  return tls_ ? tls_->connected() : plain_->connected();
}

absl::Status UvTransport::last_error() const {
  return tls_ ? tls_->last_error() : plain_->last_error();
}

size_t UvTransport::pending_commands() const {
  return tls_ ? tls_->pending_commands() : plain_->pending_commands();
}

}  // namespace dlock
