// This header defines `FakeScriptSender`, the script side of a
// FakeTransport's connection ("Scripts" in fake_transport.h): the SHA-1s
// loaded on the connection (forgotten on every new connection), the
// `SCRIPT LOAD body` + `EVALSHA` pair of a script not yet loaded (sent back
// to back, one fate from the fault plan for both), and NOSCRIPT: every
// SHA-1 is forgotten and the script sent again, once, if nothing was sent
// after it on the connection, else its callback gets kUnavailable
// (kScriptCacheFlushedMessage).
//
// It works on its transport's connection, all owned by the FakeTransport,
// which outlives it: the loop, the command queue, the fault plan, the sent
// log, and the state the command path shares -- the connection epoch and the
// closed flag (read here) and the count of commands sent (advanced here too,
// so a NOSCRIPT can tell whether anything was sent after its script).
//
// Not thread-safe: call only on the thread running the transport's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_SCRIPT_SENDER_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_SCRIPT_SENDER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/fake_command_queue.h"
#include "dlock/transport/fake/fake_fault_plan.h"
#include "dlock/transport/fake/fake_sent_log.h"
#include "dlock/transport/transport.h"

namespace dlock {

class FakeScriptSender {
 public:
  // The transport's parts and state (see above); each must outlive this
  // object.
  struct Connection {
    EventLoop* loop;
    FakeCommandQueue* commands;
    const FakeFaultPlan* faults;
    FakeSentLog* sent;
    const uint64_t* epoch;
    const bool* closed;
    uint64_t* sent_serial;
  };

  explicit FakeScriptSender(const Connection& c)
      : loop_(c.loop),
        commands_(*c.commands),
        faults_(*c.faults),
        sent_(*c.sent),
        epoch_(*c.epoch),
        closed_(*c.closed),
        sent_serial_(*c.sent_serial) {}
  FakeScriptSender(const FakeScriptSender&) = delete;
  FakeScriptSender& operator=(const FakeScriptSender&) = delete;

  // FakeTransport::SendScript once its arguments are checked: copies what
  // it keeps; `callback` runs exactly once, through the command queue.
  void Send(absl::string_view body, absl::Span<const absl::string_view> evalsha_argv,
            absl::Duration timeout, ReplyCallback callback);

 private:
  // A script command in flight (SendScript), kept for a re-send.
  struct ScriptSend {
    std::string body;
    std::vector<std::string> evalsha;
    absl::Time deadline;
    uint64_t serial = 0;  // sent_serial_ when it was sent
    uint64_t epoch = 0;
    bool resent = false;
    ReplyCallback callback;
  };
  void IssueScript(ScriptSend send);
  void OnNoScript(ScriptSend send);
  void Log(std::vector<std::string> argv) { sent_.Log(std::move(argv)); }
  bool partitioned() const { return faults_.partitioned(); }

  EventLoop* const loop_;
  FakeCommandQueue& commands_;
  const FakeFaultPlan& faults_;
  FakeSentLog& sent_;
  const uint64_t& epoch_;
  const bool& closed_;
  uint64_t& sent_serial_;
  // The SHA-1s loaded on the connection (valid for loaded_epoch_ only).
  absl::flat_hash_set<std::string> loaded_;
  uint64_t loaded_epoch_ = 1;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_SCRIPT_SENDER_H_
