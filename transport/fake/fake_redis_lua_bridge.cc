#include "dlock/transport/fake/fake_redis_lua_bridge.h"

#include <openssl/sha.h>

#include <climits>
#include <cmath>
#include <cstdio>

#include "dlock/transport/fake/fake_redis_scripting.h"

extern "C" {
#include <lua5.1/lauxlib.h>
#include <lua5.1/lua.h>
#include <lua5.1/lualib.h>
}

namespace dlock {
namespace fake_redis_internal {
namespace {

using fake_redis_lua_internal::MarkIgnoreStats;
using fake_redis_lua_internal::PushErrorBuff;

// Raises the error table for `msg` (luaPushError + luaError). Nothing in
// this frame has a destructor, so the longjmp is safe.
int RaiseError(lua_State* L, const char* msg) {
  PushErrorBuff(L, msg);
  return lua_error(L);
}

LuaCallBridge* Self(lua_State* L) {
  return static_cast<LuaCallBridge*>(lua_touserdata(L, lua_upvalueindex(1)));
}

// ---------------------------------------------------------------------------
// Functions registered in Lua.

// redis.call (raise = 1) and redis.pcall (raise = 0). No C++ object lives
// in this frame: the command runs inside the member functions it calls.
int RedisCallGeneric(lua_State* L, int raise) {
  LuaCallBridge* self = Self(L);
  if (!self->running()) {
    return RaiseError(L, "redis.call/pcall can only be called inside a script invocation");
  }
  int argc = lua_gettop(L);
  if (argc == 0) {
    PushErrorBuff(L, "Please specify at least one argument for this redis lib call");
    return raise ? lua_error(L) : 1;
  }
  int ok = self->CollectArgs(L, argc);
  lua_pop(L, argc);
  if (!ok) {
    PushErrorBuff(L, "Lua redis lib command arguments must be strings or integers");
    return raise ? lua_error(L) : 1;
  }
  int is_error = self->ExecuteCall();
  self->PushCallResult(L);
  if (raise && is_error) return lua_error(L);
  return 1;
}

int RedisCall(lua_State* L) { return RedisCallGeneric(L, 1); }
int RedisPCall(lua_State* L) { return RedisCallGeneric(L, 0); }

int RedisSha1Hex(lua_State* L) {
  if (lua_gettop(L) != 1) return RaiseError(L, "wrong number of arguments");
  size_t len = 0;
  const char* s = lua_tolstring(L, 1, &len);
  if (s == nullptr) {
    s = "";
    len = 0;
  }
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s), len, digest);
  static const char kHex[] = "0123456789abcdef";
  char hex[2 * SHA_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA_DIGEST_LENGTH; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 15];
  }
  hex[2 * SHA_DIGEST_LENGTH] = '\0';
  lua_pushstring(L, hex);
  return 1;
}

int RedisErrorReply(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    PushErrorBuff(L, "wrong number or type of arguments");
    return 1;
  }
  const char* err = lua_tostring(L, -1);
  if (err[0] != '-') {
    lua_pushstring(L, "-");
    lua_pushstring(L, err);
    lua_concat(L, 2);
  } else {
    lua_pushstring(L, err);
  }
  PushErrorBuff(L, lua_tostring(L, -1));
  return 1;
}

int RedisStatusReply(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    PushErrorBuff(L, "wrong number or type of arguments");
    return 1;
  }
  lua_newtable(L);
  lua_pushstring(L, "ok");
  lua_pushvalue(L, -3);
  lua_settable(L, -3);
  return 1;
}

int RedisLog(lua_State* L) {
  int argc = lua_gettop(L);
  if (argc < 2) return RaiseError(L, "redis.log() requires two arguments or more.");
  if (!lua_isnumber(L, -argc)) {
    return RaiseError(L, "First argument must be a number (log level).");
  }
  int level = static_cast<int>(lua_tonumber(L, -argc));
  if (level < 0 || level > 3) return RaiseError(L, "Invalid debug level.");
  return 0;  // The fake keeps no server log.
}

int RedisSetResp(lua_State* L) {
  LuaCallBridge* self = Self(L);
  if (!self->running()) {
    return RaiseError(L, "redis.setresp can only be called inside a script invocation");
  }
  if (lua_gettop(L) != 1) return RaiseError(L, "redis.setresp() requires one argument.");
  int resp = static_cast<int>(lua_tonumber(L, 1));
  if (resp != 2 && resp != 3) return RaiseError(L, "RESP version must be 2 or 3.");
  if (resp == 3) return RaiseError(L, "FakeRedis supports only RESP2 in scripts");
  return 0;
}

int RedisSetRepl(lua_State* L) {
  LuaCallBridge* self = Self(L);
  if (!self->running()) {
    return RaiseError(L, "redis.set_repl can only be called inside a script invocation");
  }
  if (lua_gettop(L) != 1) return RaiseError(L, "redis.set_repl() requires two arguments.");
  int flags = static_cast<int>(lua_tonumber(L, -1));
  if ((flags & ~3) != 0) {
    return RaiseError(
        L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
  }
  return 0;
}

int RedisTrue(lua_State* L) {
  lua_pushboolean(L, 1);
  return 1;
}

int RedisFalse(lua_State* L) {
  lua_pushboolean(L, 0);
  return 1;
}

int RedisNothing(lua_State*) { return 0; }

// math.random / math.randomseed on Redis's rand48 (server-wide state).
int MathRandom(lua_State* L) {
  LuaCallBridge* self = Self(L);
  if (!self->running()) {
    return luaL_error(L, "math.random can only be called inside a script invocation");
  }
  const lua_Number r = static_cast<lua_Number>(self->Lrand48() % INT32_MAX) /
                       static_cast<lua_Number>(INT32_MAX);
  switch (lua_gettop(L)) {
    case 0:
      lua_pushnumber(L, r);
      break;
    case 1: {
      int u = luaL_checkint(L, 1);
      luaL_argcheck(L, 1 <= u, 1, "interval is empty");
      lua_pushnumber(L, std::floor(r * u) + 1);
      break;
    }
    case 2: {
      int l = luaL_checkint(L, 1);
      int u = luaL_checkint(L, 2);
      luaL_argcheck(L, l <= u, 2, "interval is empty");
      lua_pushnumber(L, std::floor(r * (u - l + 1)) + l);
      break;
    }
    default:
      return luaL_error(L, "wrong number of arguments");
  }
  return 1;
}

int MathRandomSeed(lua_State* L) {
  LuaCallBridge* self = Self(L);
  if (!self->running()) {
    return luaL_error(L, "math.randomseed can only be called inside a script invocation");
  }
  self->Srand48(luaL_checkint(L, 1));
  return 0;
}

void SetClosure(lua_State* L, LuaCallBridge* self, const char* field, lua_CFunction fn) {
  lua_pushlightuserdata(L, self);
  lua_pushcclosure(L, fn, 1);
  lua_setfield(L, -2, field);
}

void SetNumber(lua_State* L, const char* field, lua_Number n) {
  lua_pushnumber(L, n);
  lua_setfield(L, -2, field);
}

}  // namespace

void LuaCallBridge::Install(lua_State* L) {
  lua_newtable(L);  // redis
  SetClosure(L, this, "call", RedisCall);
  SetClosure(L, this, "pcall", RedisPCall);
  SetClosure(L, this, "log", RedisLog);
  SetNumber(L, "LOG_DEBUG", 0);
  SetNumber(L, "LOG_VERBOSE", 1);
  SetNumber(L, "LOG_NOTICE", 2);
  SetNumber(L, "LOG_WARNING", 3);
  SetNumber(L, "REDIS_VERSION_NUM", 0x0007000f);
  lua_pushstring(L, "7.0.15");
  lua_setfield(L, -2, "REDIS_VERSION");
  SetClosure(L, this, "setresp", RedisSetResp);
  SetClosure(L, this, "sha1hex", RedisSha1Hex);
  SetClosure(L, this, "error_reply", RedisErrorReply);
  SetClosure(L, this, "status_reply", RedisStatusReply);
  SetClosure(L, this, "set_repl", RedisSetRepl);
  SetNumber(L, "REPL_NONE", 0);
  SetNumber(L, "REPL_AOF", 1);
  SetNumber(L, "REPL_SLAVE", 2);
  SetNumber(L, "REPL_REPLICA", 2);
  SetNumber(L, "REPL_ALL", 3);
  SetClosure(L, this, "replicate_commands", RedisTrue);
  SetClosure(L, this, "breakpoint", RedisFalse);
  SetClosure(L, this, "debug", RedisNothing);
  lua_setglobal(L, "redis");

  lua_getglobal(L, "math");
  SetClosure(L, this, "random", MathRandom);
  SetClosure(L, this, "randomseed", MathRandomSeed);
  lua_pop(L, 1);
}

void LuaCallBridge::Begin(const CallContext& caller, bool read_only) {
  script_ctx_ = CallContext();
  script_ctx_.session_id = caller.session_id;
  script_ctx_.from_script = true;
  script_ctx_.script_read_only = read_only;
  running_ = true;
}

int32_t LuaCallBridge::Lrand48() { return rand_->Next(); }

void LuaCallBridge::Srand48(int32_t seed) { rand_->Seed(seed); }

bool LuaCallBridge::CollectArgs(lua_State* L, int argc) {
  call_argv_.clear();
  for (int j = 1; j <= argc; ++j) {
    if (lua_type(L, j) == LUA_TNUMBER) {
      // Not lua_tolstring: Lua's "%.14g" loses precision; Redis uses %.17g.
      char buf[64];
      int n = std::snprintf(buf, sizeof(buf), "%.17g", static_cast<double>(lua_tonumber(L, j)));
      call_argv_.emplace_back(buf, n);
    } else {
      size_t len = 0;
      const char* s = lua_tolstring(L, j, &len);
      if (s == nullptr) return false;
      call_argv_.emplace_back(s, len);
    }
  }
  return true;
}

bool LuaCallBridge::ExecuteCall() {
  call_error_.clear();
  call_reply_ = commands_->CallFromScript(script_ctx_, call_argv_, &call_error_);
  return !call_error_.empty() || call_reply_.is_error();
}

void LuaCallBridge::PushCallResult(lua_State* L) {
  if (!call_error_.empty()) {
    PushErrorBuff(L, call_error_.c_str());
    MarkIgnoreStats(L);
    return;
  }
  fake_redis_lua_internal::PushReply(L, call_reply_, &scratch_);
}

}  // namespace fake_redis_internal
}  // namespace dlock
