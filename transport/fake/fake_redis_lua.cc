#include "dlock/transport/fake/fake_redis_lua.h"

#include <openssl/sha.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/script.h"

extern "C" {
#include <lua5.1/lauxlib.h>
#include <lua5.1/lua.h>
#include <lua5.1/lualib.h>
}

// The Lua state of FakeRedis: libraries, the redis.* API and redis.call
// bridge, global protection, the script cache and script runs. The
// Lua<->Redis reply conversion is in fake_redis_lua_reply.cc.

namespace dlock {

using fake_redis_lua_internal::MarkIgnoreStats;
using fake_redis_lua_internal::PushErrorBuff;

namespace {

// Registry keys.
constexpr char kErrHandlerKey[] = "dlock_fake_err_handler";
constexpr char kRealGlobalsKey[] = "dlock_fake_real_globals";
constexpr char kProtectedKey[] = "dlock_fake_protected_tables";
constexpr char kToStringKey[] = "dlock_fake_tostring";

// How often the instruction-count hook runs.
constexpr int kHookEvery = 100000;

FakeRedisLua* Self(lua_State* L) {
  return static_cast<FakeRedisLua*>(lua_touserdata(L, lua_upvalueindex(1)));
}

bool IsProtected(lua_State* L, int index) {
  if (index < 0) index = lua_gettop(L) + index + 1;
  lua_getfield(L, LUA_REGISTRYINDEX, kProtectedKey);
  lua_pushvalue(L, index);
  lua_rawget(L, -2);
  bool p = lua_toboolean(L, -1);
  lua_pop(L, 2);
  return p;
}

void MarkProtected(lua_State* L, int index) {
  if (index < 0) index = lua_gettop(L) + index + 1;
  lua_getfield(L, LUA_REGISTRYINDEX, kProtectedKey);
  lua_pushvalue(L, index);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

// ---------------------------------------------------------------------------
// Functions registered in Lua.

// The pcall error handler of EVAL (Redis's __redis__err__handler): turns
// the error into a table {err=..., source=..., line=...} naming the Lua
// function that raised it (the caller, when a C function raised it).
int ErrorHandler(lua_State* L) {
  lua_Debug ar;
  int have = lua_getstack(L, 1, &ar) && lua_getinfo(L, "nSl", &ar);
  if (have && std::strcmp(ar.what, "C") == 0) {
    have = lua_getstack(L, 2, &ar) && lua_getinfo(L, "nSl", &ar);
  }
  lua_settop(L, 1);
  if (!lua_istable(L, 1)) {
    lua_getfield(L, LUA_REGISTRYINDEX, kToStringKey);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    lua_pushstring(L, "ERR ");
    lua_insert(L, -2);
    lua_concat(L, 2);
    lua_newtable(L);
    lua_insert(L, -2);
    lua_setfield(L, -2, "err");
    lua_replace(L, 1);
  }
  if (have) {
    lua_pushstring(L, ar.source);
    lua_setfield(L, 1, "source");
    lua_pushinteger(L, ar.currentline);
    lua_setfield(L, 1, "line");
  }
  lua_settop(L, 1);
  return 1;
}

// __index of the globals table: Redis 7 refuses undefined globals.
int GlobalIndex(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  if (!lua_isstring(L, 2)) {
    return luaL_error(L, "Second argument to luaProtectedTableError must be a string or number");
  }
  return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                    lua_tostring(L, 2));
}

// __newindex of every protected table.
int ReadonlyNewIndex(lua_State* L) { return luaL_error(L, "Attempt to modify a readonly table"); }

int RaiseReadonly(lua_State* L) {
  lua_pushstring(L, "Attempt to modify a readonly table");
  return lua_error(L);
}

// rawset that refuses protected tables (Redis's readonly tables).
int ProtectedRawset(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkany(L, 2);
  luaL_checkany(L, 3);
  lua_settop(L, 3);
  if (IsProtected(L, 1)) return RaiseReadonly(L);
  lua_rawset(L, 1);
  return 1;
}

// setmetatable that refuses protected tables.
int ProtectedSetmetatable(lua_State* L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
  lua_settop(L, 2);
  if (IsProtected(L, 1)) return RaiseReadonly(L);
  if (luaL_getmetafield(L, 1, "__metatable")) {
    return luaL_error(L, "cannot change a protected metatable");
  }
  lua_setmetatable(L, 1);
  return 1;
}

// Redis's pcall: a caught error table {err=...} becomes its err string.
int RedisPcall(lua_State* L) {
  luaL_checkany(L, 1);
  int argc = lua_gettop(L);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  if (lua_pcall(L, argc - 1, LUA_MULTRET, 0) != 0) {
    lua_remove(L, 1);
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "err");
      if (lua_isstring(L, -1)) lua_replace(L, -2);
    }
    lua_pushboolean(L, 0);
    lua_insert(L, 1);
  }
  return lua_gettop(L);
}

// redis.call (raise = 1) and redis.pcall (raise = 0). No C++ object lives
// in this frame: the command runs inside the member functions it calls.
int RedisCallGeneric(lua_State* L, int raise) {
  FakeRedisLua* self = Self(L);
  if (!self->running()) {
    PushErrorBuff(L, "redis.call/pcall can only be called inside a script invocation");
    return lua_error(L);
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
  if (lua_gettop(L) != 1) {
    PushErrorBuff(L, "wrong number of arguments");
    return lua_error(L);
  }
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
  if (argc < 2) {
    PushErrorBuff(L, "redis.log() requires two arguments or more.");
    return lua_error(L);
  }
  if (!lua_isnumber(L, -argc)) {
    PushErrorBuff(L, "First argument must be a number (log level).");
    return lua_error(L);
  }
  int level = static_cast<int>(lua_tonumber(L, -argc));
  if (level < 0 || level > 3) {
    PushErrorBuff(L, "Invalid debug level.");
    return lua_error(L);
  }
  return 0;  // The fake keeps no server log.
}

int RedisSetResp(lua_State* L) {
  FakeRedisLua* self = Self(L);
  if (!self->running()) {
    PushErrorBuff(L, "redis.setresp can only be called inside a script invocation");
    return lua_error(L);
  }
  if (lua_gettop(L) != 1) {
    PushErrorBuff(L, "redis.setresp() requires one argument.");
    return lua_error(L);
  }
  int resp = static_cast<int>(lua_tonumber(L, 1));
  if (resp != 2 && resp != 3) {
    PushErrorBuff(L, "RESP version must be 2 or 3.");
    return lua_error(L);
  }
  if (resp == 3) {
    PushErrorBuff(L, "FakeRedis supports only RESP2 in scripts");
    return lua_error(L);
  }
  return 0;
}

int RedisSetRepl(lua_State* L) {
  FakeRedisLua* self = Self(L);
  if (!self->running()) {
    PushErrorBuff(L, "redis.set_repl can only be called inside a script invocation");
    return lua_error(L);
  }
  if (lua_gettop(L) != 1) {
    PushErrorBuff(L, "redis.set_repl() requires two arguments.");
    return lua_error(L);
  }
  int flags = static_cast<int>(lua_tonumber(L, -1));
  if ((flags & ~3) != 0) {
    PushErrorBuff(L,
                  "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    return lua_error(L);
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
  FakeRedisLua* self = Self(L);
  if (!self->running()) return luaL_error(L, "math.random can only be called inside a script invocation");
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
  FakeRedisLua* self = Self(L);
  if (!self->running()) {
    return luaL_error(L, "math.randomseed can only be called inside a script invocation");
  }
  self->Srand48(luaL_checkint(L, 1));
  return 0;
}

void CountHook(lua_State* L, lua_Debug*) {
  lua_getfield(L, LUA_REGISTRYINDEX, "dlock_fake_self");
  FakeRedisLua* self = static_cast<FakeRedisLua*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (self != nullptr && !self->CountInstructions(kHookEvery)) {
    // Fire on every line from now on, so pcall cannot swallow the abort.
    lua_sethook(L, CountHook, LUA_MASKLINE | LUA_MASKCOUNT, 1);
    luaL_error(L, "FakeRedis: script aborted after exceeding max_script_instructions");
  }
}

void OpenLib(lua_State* L, const char* name, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
}

void SetClosure(lua_State* L, FakeRedisLua* self, const char* field, lua_CFunction fn) {
  lua_pushlightuserdata(L, self);
  lua_pushcclosure(L, fn, 1);
  lua_setfield(L, -2, field);
}

void SetNumber(lua_State* L, const char* field, lua_Number n) {
  lua_pushnumber(L, n);
  lua_setfield(L, -2, field);
}

// Pushes a read-only proxy of the table at `index`.
void PushReadonlyProxy(lua_State* L, int index) {
  if (index < 0) index = lua_gettop(L) + index + 1;
  lua_newtable(L);  // proxy
  lua_newtable(L);  // its metatable
  lua_pushvalue(L, index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ReadonlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  MarkProtected(L, -1);
}

void PushStringArray(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushlstring(L, v[i].data(), v[i].size());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// Redis's evalExtractShebangFlags. Returns false with *error set.
bool ParseShebang(const std::string& body, bool* read_only, size_t* shebang_len,
                  std::string* error) {
  *read_only = false;
  *shebang_len = 0;
  if (body.compare(0, 2, "#!") != 0) return true;
  const size_t nl = body.find('\n');
  if (nl == std::string::npos) {
    *error = "ERR Invalid script shebang";
    return false;
  }
  *shebang_len = nl;
  std::vector<std::string> parts =
      absl::StrSplit(body.substr(0, nl), absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
  if (parts.empty()) {
    *error = "ERR Invalid engine in script shebang";
    return false;
  }
  if (parts[0] != "#!lua") {
    *error = absl::StrCat("ERR Unexpected engine in script shebang: ", parts[0]);
    return false;
  }
  for (size_t j = 1; j < parts.size(); ++j) {
    if (parts[j].compare(0, 6, "flags=") != 0) {
      *error = absl::StrCat("ERR Unknown lua shebang option: ", parts[j]);
      return false;
    }
    const std::string flags = parts[j].substr(6);
    if (flags.empty()) continue;
    for (absl::string_view f : absl::StrSplit(flags, ',')) {
      if (f == "no-writes") {
        *read_only = true;
      } else if (f != "allow-oom" && f != "allow-stale" && f != "no-cluster" &&
                 f != "allow-cross-slot-keys") {
        *error = absl::StrCat("ERR Unexpected flag in script shebang: ", f);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------

FakeRedisLua::FakeRedisLua(FakeRedis* server) : server_(server) {
  L_ = luaL_newstate();
  lua_State* L = L_;
  OpenLib(L, "", luaopen_base);
  OpenLib(L, LUA_TABLIBNAME, luaopen_table);
  OpenLib(L, LUA_STRLIBNAME, luaopen_string);
  OpenLib(L, LUA_MATHLIBNAME, luaopen_math);

  lua_pushlightuserdata(L, this);
  lua_setfield(L, LUA_REGISTRYINDEX, "dlock_fake_self");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kProtectedKey);
  lua_getglobal(L, "tostring");
  lua_setfield(L, LUA_REGISTRYINDEX, kToStringKey);
  lua_pushcfunction(L, ErrorHandler);
  lua_setfield(L, LUA_REGISTRYINDEX, kErrHandlerKey);

  // Globals Redis never lets scripts see.
  for (const char* name : {"print", "dofile", "loadfile"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  lua_pushcfunction(L, RedisPcall);
  lua_setglobal(L, "pcall");
  lua_pushcfunction(L, ProtectedRawset);
  lua_setglobal(L, "rawset");
  lua_pushcfunction(L, ProtectedSetmetatable);
  lua_setglobal(L, "setmetatable");

  // The redis table.
  lua_newtable(L);
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

  Protect();
}

FakeRedisLua::~FakeRedisLua() { lua_close(L_); }

// Redis 7 makes the globals table and every table reachable from it
// read-only (a patch to its Lua). With stock Lua 5.1 the same effect comes
// from proxies: the globals table becomes an empty table whose metatable
// reads from the real globals (erroring on undefined names) and refuses
// writes; library tables become read-only proxies.
void FakeRedisLua::Protect() {
  lua_State* L = L_;
  lua_newtable(L);  // real globals
  const int real = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, LUA_GLOBALSINDEX) != 0) {
    // stack: real, key, value
    bool is_g = lua_type(L, -2) == LUA_TSTRING && std::strcmp(lua_tostring(L, -2), "_G") == 0;
    if (lua_istable(L, -1) && !is_g) {
      PushReadonlyProxy(L, -1);
      lua_replace(L, -2);
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, real);
  }
  // Empty the globals table (collect keys first; never modify while iterating).
  lua_newtable(L);
  const int keys = lua_gettop(L);
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, LUA_GLOBALSINDEX) != 0) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, ++n);
  }
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L, keys, i);
    lua_pushnil(L);
    lua_rawset(L, LUA_GLOBALSINDEX);
  }
  lua_pop(L, 1);  // keys
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_setfield(L, real, "_G");

  lua_newtable(L);  // metatable of the globals
  lua_pushvalue(L, real);
  lua_pushcclosure(L, GlobalIndex, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ReadonlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, LUA_GLOBALSINDEX);
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  MarkProtected(L, -1);
  lua_pop(L, 1);

  lua_setfield(L, LUA_REGISTRYINDEX, kRealGlobalsKey);  // pops real
}

bool FakeRedisLua::Load(const std::string& body, std::string* sha, std::string* error) {
  *sha = Sha1Hex(body);
  if (Has(*sha)) return true;
  bool read_only = false;
  size_t shebang_len = 0;
  if (!ParseShebang(body, &read_only, &shebang_len, error)) return false;
  // The shebang line is skipped but its newline kept, so line numbers hold.
  if (luaL_loadbuffer(L_, body.data() + shebang_len, body.size() - shebang_len,
                      "@user_script") != 0) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    Reply r = FormatErrorReply(absl::StrCat("Error compiling script (new function): ", msg));
    *error = r.str;
    return false;
  }
  lua_setfield(L_, LUA_REGISTRYINDEX, absl::StrCat("f_", *sha).c_str());
  scripts_[*sha].read_only = read_only;
  return true;
}

std::vector<std::string> FakeRedisLua::Shas() const {
  std::vector<std::string> out;
  for (const auto& [sha, info] : scripts_) out.push_back(sha);
  return out;
}

bool FakeRedisLua::CountInstructions(int64_t n) {
  instructions_ += n;
  const int64_t limit = server_->options_.max_script_instructions;
  return limit <= 0 || instructions_ <= limit;
}

bool FakeRedisLua::CollectArgs(lua_State* L, int argc) {
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

bool FakeRedisLua::ExecuteCall() {
  call_error_.clear();
  call_reply_ = server_->CallFromScript(script_ctx_, call_argv_, &call_error_);
  return !call_error_.empty() || call_reply_.is_error();
}

void FakeRedisLua::PushCallResult(lua_State* L) {
  if (!call_error_.empty()) {
    PushErrorBuff(L, call_error_.c_str());
    MarkIgnoreStats(L);
    return;
  }
  fake_redis_lua_internal::PushReply(L, call_reply_, &scratch_);
}

Reply FakeRedisLua::Run(const std::string& sha, const FakeRedis::CallContext& caller,
                        const std::vector<std::string>& keys,
                        const std::vector<std::string>& args) {
  lua_State* L = L_;
  const ScriptInfo& info = scripts_.at(sha);
  lua_getfield(L, LUA_REGISTRYINDEX, kErrHandlerKey);
  lua_getfield(L, LUA_REGISTRYINDEX, absl::StrCat("f_", sha).c_str());
  lua_getfield(L, LUA_REGISTRYINDEX, kRealGlobalsKey);
  PushStringArray(L, keys);
  lua_setfield(L, -2, "KEYS");
  PushStringArray(L, args);
  lua_setfield(L, -2, "ARGV");
  lua_pop(L, 1);

  script_ctx_ = FakeRedis::CallContext();
  script_ctx_.session_id = caller.session_id;
  script_ctx_.from_script = true;
  script_ctx_.script_read_only = info.read_only;
  running_ = true;
  instructions_ = 0;
  if (server_->options_.max_script_instructions > 0) {
    lua_sethook(L, CountHook, LUA_MASKCOUNT, kHookEvery);
  }
  const int err = lua_pcall(L, 0, 1, -2);
  lua_sethook(L, nullptr, 0, 0);
  running_ = false;
  Reply reply = err != 0 ? fake_redis_lua_internal::ErrorToReply(L, sha)
                         : fake_redis_lua_internal::LuaToReply(L, 0);
  lua_pop(L, 1);  // the error handler
  if (++gc_count_ == 50) {
    lua_gc(L, LUA_GCSTEP, 50);
    gc_count_ = 0;
  }
  return reply;
}

}  // namespace dlock
