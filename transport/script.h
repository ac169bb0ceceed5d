// This header defines `Script`: a Lua script for Redis with its SHA-1, run
// through `Transport::SendScript`, which keeps command order whatever the
// server's script cache holds (transport.h): a real connection sends
// `SCRIPT LOAD body` right before the first EVALSHA of a script on each new
// connection, so an empty cache (a restart, a failover, `SCRIPT FLUSH`)
// never sends the script one round trip later, behind commands sent after
// it (issue 22: a release overtaking its acquire's fallback EVAL left a
// ghost key). The whole call is bounded by `timeout`.
//
// A Script is immutable after construction and thread-safe; it may be
// shared by any number of transports and loops. It must outlive the commands
// it runs (scripts are normally static constants).
#ifndef DLOCK_TRANSPORT_SCRIPT_H_
#define DLOCK_TRANSPORT_SCRIPT_H_

#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dlock/transport/transport.h"

namespace dlock {

class Script;

namespace script_internal {

// One script call in flight. It is ONE heap allocation: this object, the
// caller's reply handler (a derived Handler<F>) and, behind them, a copy
// of the call's EVALSHA argv (views and bytes), which Transport::SendScript
// may read until the callback has run (a connection re-sends it after a
// flush, or writes it once connected). The transport's callback holds only
// a pointer to it, so it stays in the callback's inline storage.
class ScriptCall {
 public:
  ScriptCall(const ScriptCall&) = delete;
  ScriptCall& operator=(const ScriptCall&) = delete;

  // Allocates a call of `handler_size` bytes (built by `construct` in the
  // memory given to it) plus room for the argv, copies the argv, and sends
  // it with `transport.SendScript`. Returns the transport's rejection (the handler
  // is then destroyed and never runs).
  static absl::Status Start(const Script& script, Transport& transport,
                            absl::Span<const absl::string_view> keys,
                            absl::Span<const absl::string_view> args,
                            absl::Duration timeout, size_t handler_size,
                            absl::FunctionRef<ScriptCall*(void*)> construct);

  // The call's KEYS (valid while the handler runs).
  absl::Span<const absl::string_view> keys() const {
    return absl::MakeConstSpan(argv_ + 3, num_keys_);
  }

 protected:
  ScriptCall() = default;
  virtual ~ScriptCall() = default;
  // Runs the caller's handler with the final reply; the call is deleted
  // right after.
  virtual void Deliver(absl::StatusOr<Reply> reply) = 0;

 private:
  struct Owner;
  static void Delete(ScriptCall* call);
  // Sends argv_ with transport_->SendScript; the reply goes to OnReply.
  absl::Status Send();
  static void OnReply(ScriptCall* call, absl::StatusOr<Reply> reply);

  const Script* script_ = nullptr;
  Transport* transport_ = nullptr;
  absl::Duration timeout_;
  absl::string_view* argv_ = nullptr;  // EVALSHA, sha1, numkeys, keys, args
  size_t argc_ = 0;
  size_t num_keys_ = 0;
  bool resent_ = false;     // re-sent once after kScriptCacheFlushedMessage
  bool in_resend_ = false;  // inside that re-send's SendScript
  bool dropped_ = false;    // the re-send's callback was destroyed unrun
};

template <typename F>
class Handler final : public ScriptCall {
 public:
  explicit Handler(F&& f) : f_(std::move(f)) {}

 private:
  void Deliver(absl::StatusOr<Reply> reply) override {
    if constexpr (std::is_invocable_v<F&&, absl::StatusOr<Reply>,
                                      absl::Span<const absl::string_view>>) {
      std::move(f_)(std::move(reply), keys());
    } else {
      std::move(f_)(std::move(reply));
    }
  }
  F f_;
};

}  // namespace script_internal

class Script {
 public:
  // `sha1` must be the lower-case hex SHA-1 of `source` (Redis's script
  // id). dlock's own scripts pass constants (lock/scripts.cc), checked by a
  // test against Sha1Hex, FakeRedis and a real server's SCRIPT LOAD, so the
  // core needs no hash code and no libcrypto.
  Script(std::string source, std::string sha1);
  // Computes the SHA-1 with OpenSSL. Defined in //transport:script_sha1
  // (link it to use this constructor); the core does not.
  explicit Script(std::string source);

  // Whether running this script later than commands sent after it is
  // harmless (e.g. a compare-and-delete by a token nobody reuses). Such a
  // script that did not run because the server's script cache was flushed
  // under its connection (kScriptCacheFlushedMessage, transport.h) is sent
  // once more, by Invoke itself -- now loaded first -- instead of failing:
  // a release must not leave its key behind for a SCRIPT FLUSH. Every other
  // script reports that kUnavailable to its caller (re-running it out of
  // order could, e.g., re-create a released key).
  enum class LateRun { kUnsafe, kSafe };
  Script(std::string source, std::string sha1, LateRun late_run);
  bool safe_to_run_late() const { return late_run_ == LateRun::kSafe; }

  const std::string& source() const { return source_; }
  // Lower-case hex SHA-1 of the source, as Redis computes it.
  const std::string& sha1() const { return sha1_; }

  // Runs the script on `transport` with `keys` and `args`. The callback
  // contract is the transport's: exactly once, never inside this call. A
  // script error is a Reply of type kError. Returns the transport's
  // rejection (the callback then never runs).
  absl::Status Run(Transport& transport, std::vector<std::string> keys,
                   std::vector<std::string> args, absl::Duration timeout,
                   ReplyCallback callback) const;

  // The same with keys and args as views (they need to live only until
  // this call returns) and any move-only handler, called as
  // `on_reply(StatusOr<Reply>)` or, if it takes them,
  // `on_reply(StatusOr<Reply>, Span<const string_view> keys)` (the call's
  // keys, e.g. to name them in an error). The handler, the copy of the
  // argv that Transport::SendScript reads, and the call's state share ONE
  // heap allocation, and the argv goes to the transport as views: the lock
  // primitives' hot path.
  template <typename F>
  absl::Status Invoke(Transport& transport, absl::Span<const absl::string_view> keys,
                      absl::Span<const absl::string_view> args,
                      absl::Duration timeout, F on_reply) const {
    using H = script_internal::Handler<F>;
    return script_internal::ScriptCall::Start(
        *this, transport, keys, args, timeout, sizeof(H),
        [&on_reply](void* mem) -> script_internal::ScriptCall* {
          return new (mem) H(std::move(on_reply));
        });
  }

  // The argv of `EVAL source numkeys keys... args...` (for tools and tests).
  std::vector<std::string> EvalArgv(const std::vector<std::string>& keys,
                                    const std::vector<std::string>& args) const;
  // The argv of `EVALSHA sha1 numkeys keys... args...`.
  std::vector<std::string> EvalShaArgv(const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) const;

 private:
  std::string source_;
  std::string sha1_;
  LateRun late_run_ = LateRun::kUnsafe;
};

// Lower-case hex SHA-1 of `data` (OpenSSL). Defined in
// //transport:script_sha1.
std::string Sha1Hex(absl::string_view data);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_SCRIPT_H_
