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
//             ZREMRANGEBYSCORE ZREMRANGEBYRANK ZPOPMIN (fake_redis_zsets.cc;
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
//     refused; no SCRIPT KILL/DEBUG, FUNCTION, MULTI, keyspace notifications.
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
#include "dlock/transport/reply.h"

namespace dlock {

class FakeRedisLua;  // The embedded Lua engine (fake_redis.cc).
namespace fake_redis_internal {
class PubSubHub;  // Sessions and channels (fake_redis_pubsub.h).
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

  // One client connection's server-side state: its pub/sub subscriptions.
  // Get one from `NewSession()`; destroy it before the server.
  class Session {
   public:
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Runs one command as this client and returns every reply the server
    // sends for it: exactly one, except SUBSCRIBE/UNSUBSCRIBE, which answer
    // once per channel, like Redis. While subscribed, only (UN)SUBSCRIBE
    // and PING are accepted (RESP2 rules). Execution is synchronous.
    std::vector<Reply> Command(std::vector<std::string> argv);

    // Called for each message published on a channel this session is
    // subscribed to, synchronously inside PUBLISH (also inside a script), so
    // it must not call back into the server (FakeTransport's handler only
    // schedules the delivery). Without a handler, messages are queued for
    // `TakeMessages()`.
    void SetMessageHandler(
        std::function<void(const std::string& channel, const std::string& message)> handler);
    // Queued messages as Redis pushes them: ["message", channel, payload].
    std::vector<Reply> TakeMessages();

    // Called once when the server restarts (the connection is dropped; the
    // session has lost its subscriptions by then).
    void SetRestartHandler(std::function<void()> handler);

    // Subscribes without going through the protocol (no replies).
    void SubscribeDirect(const std::string& channel);
    void UnsubscribeDirect(const std::string& channel);
    size_t subscription_count() const { return channels_.size(); }
    uint64_t id() const { return id_; }

   private:
    friend class FakeRedis;
    friend class fake_redis_internal::PubSubHub;
    Session(FakeRedis* server, uint64_t id) : server_(server), id_(id) {}

    FakeRedis* server_;
    uint64_t id_;
    std::set<std::string> channels_;
    std::function<void(const std::string&, const std::string&)> on_message_;
    std::function<void()> on_restart_;
    std::vector<Reply> queued_;
  };

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
  void DenyChannels(bool deny) { channels_denied_ = deny; }

  // Replication as `WAIT numreplicas timeout` sees it
  // (fake_redis_replication.cc): the fake has no replicas, it pretends
  // `n` replicas acknowledge every write at once (0 by default), so WAIT
  // answers min(n, ...) = n without waiting. ROLE answers as a master with
  // no replicas listed.
  void SetAcknowledgingReplicas(int n) { acknowledging_replicas_ = n; }
  bool channels_denied() const { return channels_denied_; }

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

  const std::string& run_id() const { return run_id_; }
  int restart_count() const { return restart_count_; }
  // The server clock, Unix milliseconds.
  int64_t NowMs() const;
  // Number of subscribers (sessions) of `channel`.
  size_t SubscriberCount(const std::string& channel) const;

  // Every command executed since construction or `ClearLog()`, in order,
  // including the redis.call/pcall commands of scripts (after their EVAL);
  // bounded by `Options::max_log_entries`.
  const std::vector<LogEntry>& log() const { return log_; }
  void ClearLog() { log_.clear(); }
  // How many logged commands are named `command` (case-insensitive).
  int64_t CountInLog(absl::string_view command) const;

  EventLoop* loop() const { return loop_; }

 private:
  friend class FakeRedisLua;

  struct Value {
    enum class Kind { kString, kHash, kZSet };
    Kind kind = Kind::kString;
    std::string str;
    std::vector<std::pair<std::string, std::string>> hash;
    // A sorted set: each member's score, and the (score, member) order.
    std::map<std::string, double> zscore;
    std::set<std::pair<double, std::string>> zorder;
    int64_t expire_ms = -1;  // absolute server time; -1: none
  };

  // Per-call context: who runs the command and from where.
  struct CallContext {
    Session* session = nullptr;   // null for Execute() and scripts' callers
    uint64_t session_id = 0;
    bool from_script = false;
    bool script_read_only = false;  // "#!lua flags=no-writes"
    std::vector<Reply>* extra = nullptr;  // SUBSCRIBE's further replies
  };

  struct CommandSpec;
  using Handler = Reply (FakeRedis::*)(CallContext&, const std::vector<std::string>&);
  struct CommandSpec {
    const char* name;  // lower case full name, e.g. "script|load"
    int arity;         // Redis arity: n exact, -n at least n
    uint32_t flags;
    Handler handler;
    const std::vector<CommandSpec>* subcommands;  // SCRIPT's, else null
  };
  enum : uint32_t {
    kWrite = 1u << 0,
    kNoScript = 1u << 1,
    kPubSubContext = 1u << 2,  // allowed while subscribed
    kMayReplicate = 1u << 3,   // refused in "no-writes" scripts, like writes
  };

  // Redis's math.random generator (rand48), state shared by all scripts.
  static constexpr uint64_t kRand48Initial = 0x1234ABCD330Eull;
  int32_t Lrand48();
  void Srand48(int32_t seed);

  static const std::vector<CommandSpec>& Commands();
  static const CommandSpec* Lookup(const std::vector<std::string>& argv,
                                   bool* is_container_miss);

  // Runs a command from a client (full processCommand checks) or from a
  // script (scriptCall checks, errors in script wording via `script_error`).
  std::vector<Reply> Dispatch(CallContext& ctx, std::vector<std::string> argv);
  // For scripts: returns the reply, or sets *script_error (no '-').
  Reply CallFromScript(CallContext& ctx, const std::vector<std::string>& argv,
                       std::string* script_error);
  void Log(const CallContext& ctx, const std::vector<std::string>& argv);

  // Keyspace.
  Value* Find(absl::string_view key);  // expires lazily; null if missing
  bool Delete(absl::string_view key);
  void ExpireAllDue();


  // Command handlers.
  Reply CmdGet(CallContext&, const std::vector<std::string>&);
  Reply CmdSet(CallContext&, const std::vector<std::string>&);
  Reply CmdSetNx(CallContext&, const std::vector<std::string>&);
  Reply CmdGetDel(CallContext&, const std::vector<std::string>&);
  Reply CmdDel(CallContext&, const std::vector<std::string>&);
  Reply CmdExists(CallContext&, const std::vector<std::string>&);
  Reply CmdType(CallContext&, const std::vector<std::string>&);
  Reply CmdEcho(CallContext&, const std::vector<std::string>&);
  Reply CmdIncr(CallContext&, const std::vector<std::string>&);
  Reply CmdDecr(CallContext&, const std::vector<std::string>&);
  Reply CmdIncrBy(CallContext&, const std::vector<std::string>&);
  Reply CmdDecrBy(CallContext&, const std::vector<std::string>&);
  Reply CmdPExpire(CallContext&, const std::vector<std::string>&);
  Reply CmdExpire(CallContext&, const std::vector<std::string>&);
  Reply CmdPTtl(CallContext&, const std::vector<std::string>&);
  Reply CmdTtl(CallContext&, const std::vector<std::string>&);
  Reply CmdPersist(CallContext&, const std::vector<std::string>&);
  Reply CmdHSet(CallContext&, const std::vector<std::string>&);
  Reply CmdHGet(CallContext&, const std::vector<std::string>&);
  Reply CmdHDel(CallContext&, const std::vector<std::string>&);
  Reply CmdHExists(CallContext&, const std::vector<std::string>&);
  Reply CmdHIncrBy(CallContext&, const std::vector<std::string>&);
  Reply CmdHLen(CallContext&, const std::vector<std::string>&);
  Reply CmdHGetAll(CallContext&, const std::vector<std::string>&);
  // Sorted sets (fake_redis_zsets.cc).
  Reply CmdZAdd(CallContext&, const std::vector<std::string>&);
  Reply CmdZIncrBy(CallContext&, const std::vector<std::string>&);
  Reply CmdZRem(CallContext&, const std::vector<std::string>&);
  Reply CmdZCard(CallContext&, const std::vector<std::string>&);
  Reply CmdZScore(CallContext&, const std::vector<std::string>&);
  Reply CmdZRank(CallContext&, const std::vector<std::string>&);
  Reply CmdZRange(CallContext&, const std::vector<std::string>&);
  Reply CmdZRangeByScore(CallContext&, const std::vector<std::string>&);
  Reply CmdZRemRangeByScore(CallContext&, const std::vector<std::string>&);
  Reply CmdZRemRangeByRank(CallContext&, const std::vector<std::string>&);
  Reply CmdZPopMin(CallContext&, const std::vector<std::string>&);
  Reply ZAddGeneric(const std::vector<std::string>& argv, bool incr);
  Reply ZRangeGeneric(const std::vector<std::string>& argv, bool by_score_command);
  Reply ZRemRangeGeneric(const std::vector<std::string>& argv, bool by_score);
  Reply CmdPublish(CallContext&, const std::vector<std::string>&);
  Reply CmdSubscribe(CallContext&, const std::vector<std::string>&);
  Reply CmdUnsubscribe(CallContext&, const std::vector<std::string>&);
  Reply CmdEval(CallContext&, const std::vector<std::string>&);
  Reply CmdEvalSha(CallContext&, const std::vector<std::string>&);
  Reply CmdScript(CallContext&, const std::vector<std::string>&);
  Reply CmdScriptLoad(CallContext&, const std::vector<std::string>&);
  Reply CmdScriptExists(CallContext&, const std::vector<std::string>&);
  Reply CmdScriptFlush(CallContext&, const std::vector<std::string>&);
  Reply CmdPing(CallContext&, const std::vector<std::string>&);
  Reply CmdTime(CallContext&, const std::vector<std::string>&);
  Reply CmdInfo(CallContext&, const std::vector<std::string>&);
  Reply CmdWait(CallContext&, const std::vector<std::string>&);
  Reply CmdRole(CallContext&, const std::vector<std::string>&);
  Reply CmdDbSize(CallContext&, const std::vector<std::string>&);
  Reply CmdFlushAll(CallContext&, const std::vector<std::string>&);

  Reply IncrDecr(const std::string& key, int64_t by);
  Reply ExpireGeneric(const std::vector<std::string>& argv, bool seconds);
  Reply TtlGeneric(const std::string& key, bool ms);
  Reply EvalGeneric(CallContext& ctx, const std::vector<std::string>& argv, bool evalsha);

  void NewRunId();

  EventLoop* loop_;
  Options options_;
  absl::Time loop_origin_;
  absl::Duration jump_ = absl::ZeroDuration();

  absl::flat_hash_map<std::string, Value> db_;
  // Sessions and their subscriptions.
  std::unique_ptr<fake_redis_internal::PubSubHub> pubsub_;

  std::unique_ptr<FakeRedisLua> lua_;
  uint64_t rand48_state_;

  std::string run_id_;
  uint64_t run_id_counter_ = 0;
  int restart_count_ = 0;
  bool channels_denied_ = false;
  int acknowledging_replicas_ = 0;
  std::vector<LogEntry> log_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_H_
