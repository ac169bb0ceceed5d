// This header defines `SentinelSet`, the sentinel side of a
// SentinelTransport (sentinel_transport.h): one connection to each
// sentinel (asked by SentinelDiscovery) and, on each, the subscription to
// `+switch-master`, whose notices for our master name start a rediscovery.
// A sentinel that cannot be reached at first is resubscribed by its
// connection when it comes back.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_SENTINEL_SET_H_
#define DLOCK_TRANSPORT_UV_SENTINEL_SET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/sentinel_options.h"

namespace dlock {

class SentinelSet {
 public:
  SentinelSet() = default;
  SentinelSet(const SentinelSet&) = delete;
  SentinelSet& operator=(const SentinelSet&) = delete;

  // Connects to each sentinel of `options` (through `factory`) and
  // subscribes it to `+switch-master`: `on_switch` runs for every notice
  // that names `options.master_name`, until Unsubscribe. The factory's
  // failure is returned.
  absl::Status Start(const SentinelTransportOptions& options,
                     SentinelConnectionFactory& factory,
                     absl::AnyInvocable<void()> on_switch);

  size_t size() const { return connections_.size(); }
  Transport& at(size_t i) { return *connections_[i]; }

  // No notice is delivered after this.
  void Unsubscribe() { switch_subs_.clear(); }
  // Closes every connection.
  void CloseAll();

 private:
  void OnSwitchMessage(absl::string_view message);

  std::string master_name_;
  absl::AnyInvocable<void()> on_switch_;
  std::vector<std::unique_ptr<Transport>> connections_;
  // Declared after the connections they live on, so destroyed first.
  std::vector<std::unique_ptr<Subscription>> switch_subs_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SENTINEL_SET_H_
