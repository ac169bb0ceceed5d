// This header defines `HeldCommands<T>`: the commands a transport over a
// changing topology (ClusterTransport before its first slot map,
// SentinelTransport while no master is known) has accepted but cannot send
// yet. Each waits, bounded by its own timeout, until the owner releases
// every one in the order they were held (the topology is known) or fails
// them (it is not, or Close); when its timeout passes first, its expiry
// callback gets it back (the owner answers kDeadlineExceeded).
//
// T is what the owner keeps for a command (an id, or the command itself).
// Destroying the holder cancels its timers; no expiry runs after that.
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_HELD_COMMANDS_H_
#define DLOCK_TRANSPORT_UV_HELD_COMMANDS_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {

template <typename T>
class HeldCommands {
 public:
  using Expiry = absl::AnyInvocable<void(T) &&>;

  explicit HeldCommands(EventLoop* loop) : loop_(loop) {}
  HeldCommands(const HeldCommands&) = delete;
  HeldCommands& operator=(const HeldCommands&) = delete;
  ~HeldCommands() {
    for (auto& [seq, held] : held_) loop_->Cancel(held.timer);
  }

  // Holds `item` until TakeAll, or until `timeout` passes: then it is
  // removed and `on_expired` gets it (the call may destroy the holder).
  void Hold(T item, absl::Duration timeout, Expiry on_expired) {
    const uint64_t seq = next_seq_++;
    Held& held = held_[seq];
    held.item = std::move(item);
    held.on_expired = std::move(on_expired);
    held.timer = loop_->RunAfter(timeout, [this, seq] {
      auto it = held_.find(seq);
      if (it == held_.end()) return;
      Held expired = std::move(it->second);
      held_.erase(it);
      std::move(expired.on_expired)(std::move(expired.item));
    });
  }

  // Every held item, in the order held; their timers are cancelled.
  std::vector<T> TakeAll() {
    std::map<uint64_t, Held> held;
    held.swap(held_);
    std::vector<T> out;
    out.reserve(held.size());
    for (auto& [seq, h] : held) {
      loop_->Cancel(h.timer);
      out.push_back(std::move(h.item));
    }
    return out;
  }

  size_t size() const { return held_.size(); }

 private:
  struct Held {
    T item;
    Expiry on_expired;
    TimerId timer = 0;
  };

  EventLoop* const loop_;
  std::map<uint64_t, Held> held_;  // by hold order
  uint64_t next_seq_ = 1;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_HELD_COMMANDS_H_
