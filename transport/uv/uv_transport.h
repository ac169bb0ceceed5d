// This header defines `UvTransport`: the real transport a Redis URL names,
// behind one type with the connection lifecycle -- `HiredisTransport` for
// redis:// and unix://, `TlsTransport` for rediss://, `SentinelTransport`
// for redis-sentinel:// (the master the sentinels name, followed across
// failovers), `ClusterTransport` (over HiredisTransports) for
// redis-cluster:// (all in this package). The CLI, BlockingClient and the examples build their
// connections with it, so none of them writes URL -> transport twice.
//
//   absl::StatusOr<RedisUrl> url = ParseRedisUrl("rediss://host:6380");
//   UvTransportOptions o = TransportOptionsForUrl(*url, tls);
//   auto t = UvTransport::Create(uv_loop, o);   // starts connecting
//
// Every call forwards to the transport inside; see hiredis_transport.h for
// the contract both keep. Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_UV_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_UV_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/cluster_transport.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/sentinel_transport.h"
#include "dlock/transport/uv/tls_transport.h"

struct uv_loop_s;

namespace dlock {

class UvTransport : public Transport {
 public:
  // SentinelTransport::Create when `options.sentinel`, else
  // HiredisTransport::Create or TlsTransport::Create, as `options.tls` says.
  static absl::StatusOr<std::unique_ptr<UvTransport>> Create(
      uv_loop_s* loop, UvTransportOptions options);

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  absl::Status SendArgv(absl::Span<const absl::string_view> argv,
                        absl::Duration timeout, ReplyCallback callback) override;
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  absl::Status SendTransaction(absl::Span<const absl::Span<const absl::string_view>> commands,
                               absl::Duration timeout, ReplyCallback callback) override;
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  uint64_t connection_epoch() const override;
  bool cluster() const override { return cluster_ != nullptr; }

  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  void Close() override;
  bool connected() const override;
  absl::Status last_error() const;
  size_t pending_commands() const override;
  bool tls() const { return tls_ != nullptr; }
  // The Sentinel transport inside (redis-sentinel://), else nullptr.
  SentinelTransport* sentinel() const { return sentinel_.get(); }
  // The cluster transport for redis-cluster://, else null.
  ClusterTransport* cluster_transport() const { return cluster_.get(); }

 private:
  UvTransport() = default;
  std::unique_ptr<HiredisTransport> plain_;
  std::unique_ptr<TlsTransport> tls_;
  std::unique_ptr<SentinelTransport> sentinel_;
  std::unique_ptr<ClusterTransport> cluster_;
  Transport* inner_ = nullptr;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_UV_TRANSPORT_H_
