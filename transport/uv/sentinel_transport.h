// This header defines `SentinelTransport`: the `Transport` for a Redis
// master watched by Sentinel (redis-sentinel:// URLs). It asks the sentinels
// where the master is, talks to it over an ordinary connection
// (HiredisTransport, or TlsTransport), and follows a failover.
//
//   discovery   ask each sentinel in turn `SENTINEL get-master-addr-by-name
//               <name>`; the first address given is checked with `ROLE` on
//               a connection to it, and only a server that answers "master"
//               is used. A round in which no sentinel names a master that
//               confirms ends with kUnavailable naming every sentinel's
//               answer (wrong master name, sentinel unreachable, ROLE says
//               slave); rounds repeat in the background with capped backoff
//               (200 ms .. 2 s) until a master is found or Close().
//   hints       a new discovery round starts on: a `+switch-master` message
//               for this name (subscribed on every sentinel), a READONLY
//               error reply (we reached a replica), a command that failed
//               with kUnavailable (connection lost), and while no master is
//               known, every Send.
//   switching   when discovery confirms a master at another address, the
//               old connection is closed: its commands in flight fail with
//               kUnavailable ("the master changed ..."; each may or may not
//               have run on the old master) and are NEVER re-sent to the new
//               one -- a lock script run again elsewhere is not the same
//               outcome. Subscriptions move to the new master (messages
//               published in between are lost, as on any reconnect).
//
// What Send gets, by state:
//
//   state       | Send(...)
//   ------------+--------------------------------------------------------
//   no master   | accepted; starts a round if none is under way and waits
//   (starting,  | for it: sent once a master is confirmed (in send order),
//   discovering)| kUnavailable (the round's error) when the round fails,
//               | kDeadlineExceeded when `timeout` passes first
//   master      | forwarded to the master's connection (its own contract:
//               | waits while it reconnects to the same address)
//   closed      | kCancelled from the call
//
// A master is never written to unless ROLE confirmed it when it was
// chosen; if it is demoted later without a sentinel notice reaching us,
// its READONLY replies (replica-read-only, Redis's default) both refuse the
// write and start a rediscovery. Replica acknowledgement (lock options
// `replica_ack`) is what keeps a granted lock across a failover.
//
// Not thread-safe: call only on the loop's thread. The loop must outlive
// the transport; the transport may be destroyed inside its own callbacks.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_TRANSPORT_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/sentinel_discovery.h"
#include "dlock/transport/uv/sentinel_master.h"
#include "dlock/transport/uv/sentinel_options.h"  // SentinelTransportOptions
#include "dlock/transport/uv/sentinel_set.h"
#include "dlock/transport/uv/sentinel_waiters.h"

struct uv_loop_s;

namespace dlock {

// The parts (each its own header): SentinelSet (the sentinels and their
// +switch-master notices), SentinelDiscovery (rounds, ROLE check),
// SentinelMaster (the master connection, the in-flight rule, the
// subscriptions that follow it), SentinelWaiters (what waits for a master).
class SentinelTransport : public Transport {
 public:
  // Makes one connection: to a sentinel (`sentinel` true) or a data node.
  using ConnectionFactory = SentinelConnectionFactory;

  // Validates `options` (kInvalidArgument: no sentinel, empty master name,
  // bad port, non-positive query_timeout, bad master connection options) and
  // starts the first discovery round on `loop`, connecting with
  // HiredisTransport (TlsTransport for the master when `options.tls`).
  static absl::StatusOr<std::unique_ptr<SentinelTransport>> Create(
      uv_loop_s* loop, SentinelTransportOptions options);
  // The same over any EventLoop and connections (tests: FakeTransport).
  static absl::StatusOr<std::unique_ptr<SentinelTransport>> Create(
      EventLoop* loop, SentinelTransportOptions options, ConnectionFactory factory);

  SentinelTransport(const SentinelTransport&) = delete;
  SentinelTransport& operator=(const SentinelTransport&) = delete;
  // Runs Close().
  ~SentinelTransport() override;

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // Forwarded to the master's connection (which loads the script on each
  // new connection: after a master change the first script on the new
  // master is loaded right before it runs). While no master is known the
  // script is held like any command, as `EVAL body ...` (Transport's
  // default): order-safe whatever the new master's cache holds.
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  // Forwarded to the current master (never re-sent to a new one);
  // kUnimplemented while none is known: the caller's script waits for one.
  absl::Status SendTransaction(absl::Span<const absl::Span<const absl::string_view>> commands,
                               absl::Duration timeout, ReplyCallback callback) override;
  // Subscribes on the current master, and again on every new master.
  // on_ready runs once: with the first master's confirmation or failure.
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  // A new value for every master connection (master switch or reconnect);
  // 0 while no master is connected.
  uint64_t connection_epoch() const override { return master_.connection_epoch(); }

  // OK once a master is confirmed (on the next turn if it already is), or
  // the failure of the current discovery round (kUnavailable, naming each
  // sentinel's answer), or kCancelled by Close().
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  void Close() override;
  bool connected() const override;
  size_t pending_commands() const override;

  // The last discovery failure (OK if none).
  absl::Status last_error() const { return discovery_.last_error(); }
  // "host:port" of the confirmed master ("" if none).
  std::string master_address() const { return master_.address(); }
  // How many times a (different) master was installed.
  uint64_t master_changes() const { return master_.generation(); }

 private:
  SentinelTransport(EventLoop* loop, std::unique_ptr<EventLoop> owned_loop,
                    SentinelTransportOptions options, ConnectionFactory factory);
  absl::Status Start();

  // Discovery outcomes (see SentinelDiscovery::Outcomes).
  void OnNewMaster(std::unique_ptr<Transport> master, std::string host, int port);
  void OnConfirmed();
  void OnRoundFailed(const absl::Status& why);

  EventLoop* const loop_;
  std::unique_ptr<EventLoop> owned_loop_;
  const SentinelTransportOptions options_;
  ConnectionFactory factory_;
  bool closed_ = false;
  // Declared in dependency order (destroyed in reverse).
  SentinelSet sentinels_;
  SentinelMaster master_;
  SentinelDiscovery discovery_;
  SentinelWaiters waiters_;
  TimerId retry_ready_timer_ = 0;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_TRANSPORT_H_
