#include "dlock/transport/uv/sentinel_set.h"

#include <utility>
#include <vector>

#include "absl/strings/str_split.h"

namespace dlock {

absl::Status SentinelSet::Start(const SentinelTransportOptions& options,
                                SentinelConnectionFactory& factory,
                                absl::AnyInvocable<void()> on_switch) {
  master_name_ = options.master_name;
  on_switch_ = std::move(on_switch);
  for (const SentinelTransportOptions::Endpoint& e : options.sentinels) {
    absl::StatusOr<std::unique_ptr<Transport>> c = factory(e.host, e.port, true);
    if (!c.ok()) return c.status();
    connections_.push_back(*std::move(c));
    // The subscriptions go before this set (see switch_subs_), so `this`
    // outlives every message.
    absl::StatusOr<std::unique_ptr<Subscription>> sub = connections_.back()->Subscribe(
        "+switch-master",
        [this](absl::string_view, absl::string_view message) { OnSwitchMessage(message); },
        [](absl::Status) {});
    if (sub.ok()) switch_subs_.push_back(*std::move(sub));
  }
  return absl::OkStatus();
}

void SentinelSet::OnSwitchMessage(absl::string_view message) {
  // "<name> <old-ip> <old-port> <new-ip> <new-port>"
  std::vector<absl::string_view> parts = absl::StrSplit(message, ' ');
  if (parts.empty() || parts[0] != master_name_) return;
  on_switch_();
}

void SentinelSet::CloseAll() {
  for (auto& c : connections_) c->Close();
}

}  // namespace dlock
