// Internal to //transport/fake: FakeRedis's command dispatch. Not a public
// API.
//
// `CommandTable` is the table every command family registers its commands
// in (fake_redis_strings.h, fake_redis_hashes.h, fake_redis_zsets.h,
// fake_redis_pubsub.h, fake_redis_scripting.h, fake_redis_server.h), and
// the checks Redis makes before running one: processCommand's for a client,
// scriptCall's for redis.call. `CommandLog` records what ran.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_COMMANDS_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_COMMANDS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

class ServerClock;

// A command's arguments, the name first.
using Args = std::vector<std::string>;

// Who runs a command, and from where.
struct CallContext {
  FakeRedisSession* session = nullptr;  // null for Execute() and scripts
  uint64_t session_id = 0;
  bool from_script = false;
  bool script_read_only = false;        // "#!lua flags=no-writes"
  std::vector<Reply>* extra = nullptr;  // SUBSCRIBE's further replies
};

// Command flags (Redis's CMD_*).
enum CommandFlag : uint32_t {
  kWrite = 1u << 0,
  kNoScript = 1u << 1,
  kPubSubContext = 1u << 2,  // allowed while subscribed
  kMayReplicate = 1u << 3,   // refused in "no-writes" scripts, like writes
};

// Every command executed, in order, bounded: past `max_entries` the oldest
// half is discarded (0 disables the log).
class CommandLog {
 public:
  // `clock` stamps the entries and must outlive the log.
  CommandLog(const ServerClock* clock, size_t max_entries)
      : clock_(clock), max_entries_(max_entries) {}
  CommandLog(const CommandLog&) = delete;
  CommandLog& operator=(const CommandLog&) = delete;

  void Add(const CallContext& ctx, const Args& argv);
  const std::vector<FakeRedis::LogEntry>& entries() const { return entries_; }
  void Clear() { entries_.clear(); }
  // How many entries are named `command` (case-insensitive).
  int64_t Count(absl::string_view command) const;

 private:
  const ServerClock* clock_;
  size_t max_entries_;
  std::vector<FakeRedis::LogEntry> entries_;
};

class CommandTable {
 public:
  using Handler = std::function<Reply(CallContext&, const Args&)>;

  // `log` must outlive the table.
  explicit CommandTable(CommandLog* log) : log_(log) {}
  CommandTable(const CommandTable&) = delete;
  CommandTable& operator=(const CommandTable&) = delete;

  // Registers a command: `name` in lower case, `arity` as Redis states it
  // (n exactly n arguments, -n at least n, the name included), `flags` of
  // CommandFlag. A subcommand is named "container|sub" (e.g. "script|load");
  // its container must be registered first and is then looked up by its
  // first argument.
  void Add(const std::string& name, int arity, uint32_t flags, Handler handler);
  // The same for a family's member function, with or without the context.
  template <typename Family>
  void Add(const std::string& name, int arity, uint32_t flags, Family* family,
           Reply (Family::*handler)(const Args&)) {
    Add(name, arity, flags,
        [family, handler](CallContext&, const Args& argv) { return (family->*handler)(argv); });
  }
  template <typename Family>
  void Add(const std::string& name, int arity, uint32_t flags, Family* family,
           Reply (Family::*handler)(CallContext&, const Args&)) {
    Add(name, arity, flags, [family, handler](CallContext& ctx, const Args& argv) {
      return (family->*handler)(ctx, argv);
    });
  }

  // Runs a command from a client with processCommand's checks (unknown
  // command, arity, ACL, pub/sub context) and returns every reply: one,
  // or one per channel for (UN)SUBSCRIBE.
  std::vector<Reply> Dispatch(CallContext& ctx, Args argv);
  // The error processCommand gives `argv` before running it (unknown
  // command or subcommand, arity), or nullopt: what MULTI checks when it
  // queues a command (a queued command with such an error makes EXEC
  // answer EXECABORT).
  std::optional<Reply> QueueError(const Args& argv) const;
  // Records `argv` in the log without running it (MULTI, EXEC, DISCARD,
  // which the session handles).
  void LogOnly(const CallContext& ctx, const Args& argv) { log_->Add(ctx, argv); }
  // Runs a command from a script with scriptCall's checks. Returns the
  // reply, or sets *script_error (the error text, no '-') if refused.
  Reply CallFromScript(CallContext& ctx, const Args& argv, std::string* script_error);

  // ACL without channel permission (FakeRedis::DenyChannels).
  void set_channels_denied(bool deny) { channels_denied_ = deny; }
  bool channels_denied() const { return channels_denied_; }

 private:
  struct Spec {
    std::string name;
    int arity;
    uint32_t flags;
    Handler handler;
    bool container;  // has subcommands
  };

  // The spec for argv; null if unknown, with *container_miss set when the
  // command is known but its subcommand is not.
  const Spec* Lookup(const Args& argv, bool* container_miss) const;

  CommandLog* log_;
  absl::flat_hash_map<std::string, Spec> commands_;
  absl::flat_hash_map<std::string, Spec> subcommands_;  // "container|sub"
  bool channels_denied_ = false;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_COMMANDS_H_
