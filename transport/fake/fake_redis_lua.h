// Internal to //transport/fake: the embedded Lua 5.1 engine of FakeRedis.
// Not a public API; include only from fake_redis*.cc and its tests.
//
// One `FakeRedisLua` is one Redis scripting environment: a lua_State with
// Redis's libraries, `redis.*` API and global protection, plus the script
// cache (SHA-1 -> compiled function). SCRIPT FLUSH and a server restart
// replace it with a fresh one.
//
// lua_error() longjmps. Every C function registered in Lua is written so no
// C++ object with a destructor is alive in a frame that may raise: C++ work
// happens in member functions that return before the raise, and their
// results live in members (`call_argv_`, `call_reply_`, ...), not on the
// stack.
//
// Not thread-safe (like FakeRedis).
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/reply.h"

struct lua_State;

namespace dlock {

// Redis's addReplyErrorFormat: trims CR/LF at both ends, turns inner ones
// into spaces, and prefixes "ERR " unless the text starts with '-'.
Reply FormatErrorReply(std::string text);

// Error tables, shared by fake_redis_lua.cc (the redis.* API) and
// fake_redis_lua_reply.cc (reply conversion). Neither raises.
namespace fake_redis_lua_internal {

// Redis's luaPushErrorBuff: "-CODE msg" or "msg" (code ERR) becomes the
// table {err = "CODE msg"}, msg trimmed of CR/LF. C-string semantics.
void PushErrorBuff(lua_State* L, const char* buf);
// Sets ignore_error_stats_update = true in the table on top of the stack.
void MarkIgnoreStats(lua_State* L);

// Redis's conversions between replies and Lua values, in
// fake_redis_lua_reply.cc. None raises.
// Pushes `r` as a Lua value (redisProtocolToLuaType); `scratch` is a
// reusable buffer for error texts.
void PushReply(lua_State* L, const Reply& r, std::string* scratch);
// Pops the value on top of the stack as a reply (luaReplyToRedisReply),
// `depth` levels deep in a nested table.
Reply LuaToReply(lua_State* L, int depth);
// Pops the error a failed run of script `sha` left on top of the stack, as
// the error reply Redis gives (luaCallFunction's error branch).
Reply ErrorToReply(lua_State* L, const std::string& sha);

}  // namespace fake_redis_lua_internal

class FakeRedisLua {
 public:
  explicit FakeRedisLua(FakeRedis* server);
  ~FakeRedisLua();

  FakeRedisLua(const FakeRedisLua&) = delete;
  FakeRedisLua& operator=(const FakeRedisLua&) = delete;

  // Whether a script with this lower-case SHA-1 is cached.
  bool Has(const std::string& sha) const { return scripts_.count(sha) != 0; }
  // Compiles and caches `body` (a no-op if cached). On success sets *sha;
  // on failure sets *error to the error reply text (without '-').
  bool Load(const std::string& body, std::string* sha, std::string* error);
  // Runs the cached script `sha` with KEYS/ARGV, as called by `caller`.
  Reply Run(const std::string& sha, const FakeRedis::CallContext& caller,
            const std::vector<std::string>& keys, const std::vector<std::string>& args);
  std::vector<std::string> Shas() const;

  // ---- For the C functions registered in Lua (internal). ----
  FakeRedis* server() const { return server_; }
  int32_t Lrand48() { return server_->Lrand48(); }
  void Srand48(int32_t seed) { server_->Srand48(seed); }
  bool running() const { return running_; }
  // Copies the `argc` arguments on the Lua stack to `call_argv_`. False if
  // one is neither a string nor a number. Never raises.
  bool CollectArgs(lua_State* L, int argc);
  // Runs `call_argv_` as a command from the script. Returns true if the
  // outcome is an error (script-level refusal or error reply). Never raises.
  bool ExecuteCall();
  // Pushes the outcome of the last ExecuteCall (value or error table).
  void PushCallResult(lua_State* L);
  // Instruction accounting for the runaway-script limit.
  bool CountInstructions(int64_t n);

 private:
  struct ScriptInfo {
    bool read_only = false;  // "#!lua flags=no-writes"
  };

  void Protect();

  lua_State* L_ = nullptr;
  FakeRedis* server_;
  std::map<std::string, ScriptInfo> scripts_;

  bool running_ = false;
  FakeRedis::CallContext script_ctx_;
  int64_t instructions_ = 0;
  int gc_count_ = 0;

  std::vector<std::string> call_argv_;
  Reply call_reply_;
  std::string call_error_;
  std::string scratch_;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_
