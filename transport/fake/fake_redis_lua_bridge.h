// Internal to //transport/fake: what a FakeRedis script sees of its server.
// Not a public API; include only from fake_redis_lua*.cc.
//
// `LuaCallBridge` installs the `redis` table (redis.call, redis.pcall,
// redis.error_reply, redis.status_reply, redis.sha1hex, redis.log,
// redis.setresp, redis.set_repl, ...) and math.random/randomseed in a Lua
// state, and carries redis.call to the server's CommandTable with Redis's
// Lua-to-command and reply-to-Lua rules (fake_redis_lua_reply.cc holds the
// conversions). The interpreter's lifecycle, global protection and script
// cache are FakeRedisLua's (fake_redis_lua.h), which owns one bridge.
//
// lua_error() longjmps. Every C function registered in Lua is written so no
// C++ object with a destructor is alive in a frame that may raise: C++ work
// happens in member functions that return before the raise, and their
// results live in members (`call_argv_`, `call_reply_`, ...), not on the
// stack.
//
// Not thread-safe (like FakeRedis).
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_BRIDGE_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_BRIDGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/reply.h"

struct lua_State;

namespace dlock {

// Redis's conversions between replies and Lua values, and its error
// tables (fake_redis_lua_reply.cc). None raises.
namespace fake_redis_lua_internal {

// Redis's luaPushErrorBuff: "-CODE msg" or "msg" (code ERR) becomes the
// table {err = "CODE msg"}, msg trimmed of CR/LF. C-string semantics.
void PushErrorBuff(lua_State* L, const char* buf);
// Sets ignore_error_stats_update = true in the table on top of the stack.
void MarkIgnoreStats(lua_State* L);
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

namespace fake_redis_internal {

class Rand48;

class LuaCallBridge {
 public:
  // `commands` and `rand` must outlive the bridge.
  LuaCallBridge(CommandTable* commands, Rand48* rand) : commands_(commands), rand_(rand) {}
  LuaCallBridge(const LuaCallBridge&) = delete;
  LuaCallBridge& operator=(const LuaCallBridge&) = delete;

  // Sets the global `redis` table and math.random/randomseed of `L`, bound
  // to this bridge (which must outlive `L`).
  void Install(lua_State* L);

  // A script run starts: until `End`, redis.call runs commands as a script
  // called by `caller` (read-only for a "no-writes" script).
  void Begin(const CallContext& caller, bool read_only);
  void End() { running_ = false; }

  // ---- For the C functions registered in Lua. ----
  bool running() const { return running_; }
  int32_t Lrand48();
  void Srand48(int32_t seed);
  // Copies the `argc` arguments on the Lua stack to `call_argv_`. False if
  // one is neither a string nor a number. Never raises.
  bool CollectArgs(lua_State* L, int argc);
  // Runs `call_argv_` as a command from the script. Returns true if the
  // outcome is an error (script-level refusal or error reply). Never raises.
  bool ExecuteCall();
  // Pushes the outcome of the last ExecuteCall (value or error table).
  void PushCallResult(lua_State* L);

 private:
  CommandTable* commands_;
  Rand48* rand_;
  bool running_ = false;
  CallContext script_ctx_;

  std::vector<std::string> call_argv_;
  Reply call_reply_;
  std::string call_error_;
  std::string scratch_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_BRIDGE_H_
