#include "dlock/transport/fake/fake_redis_lua.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/script.h"

extern "C" {
#include <lua5.1/lauxlib.h>
#include <lua5.1/lua.h>
#include <lua5.1/lualib.h>
}

// The Lua state of FakeRedis: libraries, global protection, Redis's pcall,
// the script cache and script runs. The redis.* API and redis.call bridge
// are in fake_redis_lua_bridge.cc, the Lua<->Redis reply conversion in
// fake_redis_lua_reply.cc.

namespace dlock {
namespace {

// Registry keys.
constexpr char kErrHandlerKey[] = "dlock_fake_err_handler";
constexpr char kRealGlobalsKey[] = "dlock_fake_real_globals";
constexpr char kProtectedKey[] = "dlock_fake_protected_tables";
constexpr char kToStringKey[] = "dlock_fake_tostring";

// How often the instruction-count hook runs.
constexpr int kHookEvery = 100000;

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

FakeRedisLua::FakeRedisLua(fake_redis_internal::CommandTable* commands,
                           fake_redis_internal::Rand48* rand, int64_t max_script_instructions)
    : bridge_(commands, rand), max_script_instructions_(max_script_instructions) {
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

  bridge_.Install(L);
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
    Reply r = fake_redis_internal::FormatError(
        absl::StrCat("Error compiling script (new function): ", msg));
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
  return max_script_instructions_ <= 0 || instructions_ <= max_script_instructions_;
}

Reply FakeRedisLua::Run(const std::string& sha, const fake_redis_internal::CallContext& caller,
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

  bridge_.Begin(caller, info.read_only);
  instructions_ = 0;
  if (max_script_instructions_ > 0) {
    lua_sethook(L, CountHook, LUA_MASKCOUNT, kHookEvery);
  }
  const int err = lua_pcall(L, 0, 1, -2);
  lua_sethook(L, nullptr, 0, 0);
  bridge_.End();
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
