// This header defines `FakeRedis`: an in-memory Redis 7.0 server for tests,
// faithful rather than a stub. It runs dlock's Lua scripts on an embedded
// Lua 5.1 (the Lua Redis embeds) with Redis's conversion rules, expires keys
// on the clock of an `EventLoop` (so a `ManualEventLoop` drives expiry in
// virtual time), and words its error replies exactly as redis-server 7.0.15
// does (checked by a differential test against a real server).
//
// Commands (RESP2; names are case-insensitive):
//   strings   GET SET(NX XX GET KEEPTTL EX PX EXAT PXAT) SETNX GETDEL DEL
//             EXISTS INCR INCRBY DECR DECRBY TYPE ECHO
//   expiry    PEXPIRE EXPIRE (NX XX GT LT) PTTL TTL PERSIST
//   hashes    HSET HGET HDEL HEXISTS HINCRBY HLEN HGETALL
//   zsets     ZADD(NX XX GT LT CH INCR) ZINCRBY ZREM ZCARD ZSCORE ZRANK
//             ZRANGE(BYSCORE REV LIMIT WITHSCORES) ZRANGEBYSCORE
//             ZREMRANGEBYSCORE ZREMRANGEBYRANK ZPOPMIN (fake_redis_zsets.h;
//             scores printed with %.17g like Redis 7.0, no BYLEX)
//   pub/sub   PUBLISH SUBSCRIBE UNSUBSCRIBE (see `Session`)
//   scripting EVAL EVALSHA SCRIPT LOAD|EXISTS|FLUSH
//   server    PING TIME INFO DBSIZE FLUSHALL
// Anything else gets Redis's "unknown command" error.
//
// Inside scripts: KEYS, ARGV, redis.call, redis.pcall, redis.error_reply,
// redis.status_reply, redis.sha1hex, redis.log (ignored), redis.setresp(2),
// redis.set_repl, redis.replicate_commands, redis.REDIS_VERSION(_NUM),
// math.random/randomseed (Redis's rand48), Redis's `pcall`, the base, table,
// string and math libraries, and Redis 7's global protection (scripts cannot
// create or change globals; reading an undefined global is an error). A
// script runs atomically: nothing else runs until it returns.
//
// The clock: the server's time in Unix milliseconds is
//   options.start_time + (loop->Now() - loop->Now() at construction) + jumps
// so it advances exactly with the loop and `JumpClock` moves it.
//
// Known differences from Redis 7.0.15 (by design of a test double):
//   - Expired keys vanish exactly at their deadline (no lazy/active expiry
//     lag), so DBSIZE never counts an expired key.
//   - HGETALL always lists fields in insertion order (Redis does so only for
//     small listpack-encoded hashes: <= 128 fields of <= 64 bytes).
//   - No cjson/cmsgpack/struct/bit libraries; RESP3 (redis.setresp(3)) is
//     refused; no SCRIPT KILL/DEBUG, FUNCTION, WATCH, keyspace notifications
//     (MULTI/EXEC/DISCARD are: fake_redis_session.h).
//   - Protected library tables are proxies: `pairs(string)` and
//     `pairs(_G)` iterate nothing, `getmetatable(_G)` is false.
//   - A script that runs past `Options::max_script_instructions` is aborted
//     with an error (Redis would keep running it and answer BUSY to others).
//   - A script raising an error table without an `err` field crashes
//     redis-server 7.0.15; here it gets an explanatory error reply.
//   - INFO has only the "server" section, with fewer fields; SCRIPT HELP,
//     SCRIPT KILL/DEBUG are unknown subcommands.
//   - UNSUBSCRIBE without arguments lists the channels in sorted order
//     (Redis: hash-table order).
//   - Inside scripts `rawget(_G, name)` is nil for every global (the globals
//     live behind the read-only proxy).
//
// Lifetime: `loop` must outlive the server. Sessions and transports must be
// destroyed before the server.
//
// Not thread-safe: call only on the thread running `loop`.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/fake_redis_session.h"
#include "dlock/transport/reply.h"

namespace dlock {

// FakeRedis's components (internal; see the headers named).
namespace fake_redis_internal {
class ServerClock;        // fake_redis_keyspace.h
class Keyspace;           // fake_redis_keyspace.h
class CommandLog;         // fake_redis_commands.h
class CommandTable;       // fake_redis_commands.h
class PubSubHub;          // fake_redis_pubsub.h
class StringCommands;     // fake_redis_strings.h
class HashCommands;       // fake_redis_hashes.h
class ZSetCommands;       // fake_redis_zsets.h
class PubSubCommands;     // fake_redis_pubsub.h
class ScriptingCommands;  // fake_redis_scripting.h
class ServerCommands;     // fake_redis_server.h
}  // namespace fake_redis_internal

class FakeRedis {
 public:
  struct Options {
    // The wall-clock time the server's clock shows at construction (TIME,
    // EXAT/PXAT and absolute expiry times are relative to it).
    absl::Time start_time = absl::FromUnixSeconds(1700000000);
    // A script that executes more Lua VM instructions than this is aborted
    // with an error, so a runaway script fails a test instead of hanging
    // it. 0 means no limit.
    int64_t max_script_instructions = 1000000000;
    // The command log keeps at most this many entries; past it the oldest
    // half is discarded (so a long-running demo does not grow without
    // bound). 0 disables the log.
    size_t max_log_entries = 1000000;
  };

  // One client connection (fake_redis_session.h). Get one from
  // `NewSession()`; destroy it before the server.
  using Session = FakeRedisSession;

  // One executed command, for tests that check what reached the server.
  struct LogEntry {
    uint64_t session_id;  // 0 for `FakeRedis::Execute`
    std::vector<std::string> argv;
    bool from_script;     // run by redis.call/pcall inside EVAL/EVALSHA
    int64_t time_ms;      // server clock (Unix ms) when it ran
  };

  explicit FakeRedis(EventLoop* loop);
  FakeRedis(EventLoop* loop, Options options);
  ~FakeRedis();

  FakeRedis(const FakeRedis&) = delete;
  FakeRedis& operator=(const FakeRedis&) = delete;

  // Runs one command as an anonymous client that never subscribes
  // (SUBSCRIBE and UNSUBSCRIBE get an error reply; use a `Session`).
  Reply Execute(std::vector<std::string> argv);

  // A new client connection.
  std::unique_ptr<Session> NewSession();

  // ---- Server faults -------------------------------------------------------

  // Simulates a crash and restart with no persistence: every key and the
  // script cache are lost, the run_id changes, math.random restarts, every
  // session loses its subscriptions and gets its restart handler called.
  void Restart();
  // Moves the server's clock (not the loop's) by `d`, forward or back. Keys
  // whose deadline the new time has passed are expired; a backward jump
  // makes keys live longer, as on a real server whose clock was set back.
  void JumpClock(absl::Duration d);
  // Deletes `key` as maxmemory eviction would. Returns whether it existed.
  bool Evict(absl::string_view key);
  // ACL without channel permission: as if every client's user had been
  // given `resetchannels` (`&none`), as redis-server 7.0.15 answers it.
  // PUBLISH and SUBSCRIBE from a client get "NOPERM this user has no
  // permissions to access one of the channels used as arguments" (checked
  // right after the arity check, before anything runs); PUBLISH from a
  // script fails with "The user executing the script can't publish to the
  // channel mentioned in the command" (redis.call raises it as an ERR with
  // the script suffix, redis.pcall returns it as an error table), and the
  // script's earlier writes stay (scripts do not roll back). Survives
  // Restart() (like a user defined in the config). Not modelled:
  // FakeTransport::Subscribe subscribes its session directly and is not
  // refused (a real server refuses the pub/sub connection's SUBSCRIBE).
  void DenyChannels(bool deny);

  // Replication as `WAIT numreplicas timeout` sees it
  // (fake_redis_server.h): the fake has no replicas, it pretends
  // `n` replicas acknowledge every write at once (0 by default), so WAIT
  // answers min(n, ...) = n without waiting. ROLE answers as a master with
  // no replicas listed.
  void SetAcknowledgingReplicas(int n);
  bool channels_denied() const;

  // ---- Inspection (no side effects besides expiring due keys) -------------

  bool Exists(absl::string_view key);
  // The value of a string key; nullopt if missing or not a string.
  std::optional<std::string> GetString(absl::string_view key);
  // The fields of a hash key in order; nullopt if missing or not a hash.
  std::optional<std::vector<std::pair<std::string, std::string>>> GetHash(
      absl::string_view key);
  // Remaining time to live in ms: -2 missing, -1 no expiry (as PTTL).
  int64_t PTtl(absl::string_view key);
  // Live keys, sorted.
  std::vector<std::string> Keys();
  size_t DbSize();
  // SHA-1s (lower-case hex) of the cached scripts, sorted.
  std::vector<std::string> CachedScripts() const;

  const std::string& run_id() const;
  int restart_count() const { return restart_count_; }
  // The server clock, Unix milliseconds.
  int64_t NowMs() const;
  // Number of subscribers (sessions) of `channel`.
  size_t SubscriberCount(const std::string& channel) const;

  // Every command executed since construction or `ClearLog()`, in order,
  // including the redis.call/pcall commands of scripts (after their EVAL);
  // bounded by `Options::max_log_entries`.
  const std::vector<LogEntry>& log() const;
  void ClearLog();
  // How many logged commands are named `command` (case-insensitive).
  int64_t CountInLog(absl::string_view command) const;

  EventLoop* loop() const { return loop_; }

 private:
  // The components, each with one job; declared in the order they are
  // built (each one's dependencies before it).
  EventLoop* loop_;
  std::unique_ptr<fake_redis_internal::ServerClock> clock_;
  std::unique_ptr<fake_redis_internal::CommandLog> log_;
  std::unique_ptr<fake_redis_internal::Keyspace> keyspace_;
  // The dispatch table every command family registers in.
  std::unique_ptr<fake_redis_internal::CommandTable> commands_;
  // Sessions and their subscriptions.
  std::unique_ptr<fake_redis_internal::PubSubHub> pubsub_;
  // The command families.
  std::unique_ptr<fake_redis_internal::StringCommands> strings_;
  std::unique_ptr<fake_redis_internal::HashCommands> hashes_;
  std::unique_ptr<fake_redis_internal::ZSetCommands> zsets_;
  std::unique_ptr<fake_redis_internal::PubSubCommands> pubsub_commands_;
  std::unique_ptr<fake_redis_internal::ScriptingCommands> scripting_;
  std::unique_ptr<fake_redis_internal::ServerCommands> server_;
  int restart_count_ = 0;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_H_
