// Internal to //transport/uv: `CommandDeadlines`, the per-command deadlines
// of CommandLedger (HiredisTransport and TlsTransport). hiredis 0.14 has no
// command timeouts, so the transport keeps its own: an intrusive list of commands
// sorted by deadline behind ONE libuv timer armed at the earliest. Commands
// almost always share one timeout, so inserting from the tail is O(1), and
// a command costs no allocation here.
//
// The timer keeps the loop alive only while a deadline is pending. Not
// thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_UV_COMMAND_DEADLINES_H_
#define DLOCK_TRANSPORT_UV_COMMAND_DEADLINES_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

struct uv_loop_s;
struct uv_timer_s;

namespace dlock {

class CommandDeadlines;

// A command's links into the list; the command type derives from it.
// Destroying a node takes it out of its list.
struct DeadlineNode {
  DeadlineNode() = default;
  DeadlineNode(const DeadlineNode&) = delete;
  DeadlineNode& operator=(const DeadlineNode&) = delete;
  ~DeadlineNode();

  CommandDeadlines* deadline_owner = nullptr;  // set while listed
  DeadlineNode* deadline_prev = nullptr;
  DeadlineNode* deadline_next = nullptr;
  int64_t deadline_ns = 0;  // uv_hrtime() clock
};

class CommandDeadlines {
 public:
  // Runs for each node whose deadline passed, after taking it out of the
  // list. Returns false when the owner of this list was destroyed inside
  // (then nothing of the list is touched again).
  using OnExpired = absl::AnyInvocable<bool(DeadlineNode*)>;

  CommandDeadlines(uv_loop_s* loop, OnExpired on_expired);
  CommandDeadlines(const CommandDeadlines&) = delete;
  CommandDeadlines& operator=(const CommandDeadlines&) = delete;
  // Runs Close().
  ~CommandDeadlines();

  // Lists `node` to expire `timeout` from now (a huge timeout is capped).
  void Add(DeadlineNode* node, absl::Duration timeout);
  // Takes `node` out of the list; nothing if it is not listed.
  void Remove(DeadlineNode* node);
  // Stops and closes the timer (libuv frees it in its close callback, so the
  // host can uv_loop_close after one more loop run). Call when no node is
  // listed any more. Idempotent; Add must not be called after it.
  void Close();

 private:
  void Arm();
  void OnTimer();

  OnExpired on_expired_;
  DeadlineNode* head_ = nullptr;
  DeadlineNode* tail_ = nullptr;
  uv_timer_s* timer_ = nullptr;  // null after Close
  int64_t armed_ns_ = 0;         // 0: not armed
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_COMMAND_DEADLINES_H_
