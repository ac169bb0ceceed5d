// The Lua<->Redis reply conversion rules of FakeRedis's scripting: error
// tables, Redis reply -> Lua value, Lua value -> Redis reply, and the error
// reply of a failed script run (declared in fake_redis_lua_bridge.h).
#include "dlock/transport/fake/fake_redis_lua_bridge.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"

extern "C" {
#include <lua5.1/lauxlib.h>
#include <lua5.1/lua.h>
#include <lua5.1/lualib.h>
}

namespace dlock {

using fake_redis_internal::FormatError;

namespace fake_redis_lua_internal {

// ---------------------------------------------------------------------------
// Error tables. None of these helpers holds a C++ object across a Lua call.

// Redis's luaPushErrorBuff: "-CODE msg" or "msg" (code ERR) becomes the
// table {err = "CODE msg"}, msg trimmed of CR/LF. C-string semantics.
void PushErrorBuff(lua_State* L, const char* buf) {
  const char* code = "ERR";
  size_t code_len = 3;
  const char* msg = buf;
  if (buf[0] == '-') {
    const char* space = std::strchr(buf, ' ');
    if (space == nullptr) {
      msg = buf + 1;
    } else {
      code = buf + 1;
      code_len = static_cast<size_t>(space - code);
      msg = space + 1;
    }
  }
  size_t len = std::strlen(msg);
  while (len > 0 && (msg[0] == '\r' || msg[0] == '\n')) {
    ++msg;
    --len;
  }
  while (len > 0 && (msg[len - 1] == '\r' || msg[len - 1] == '\n')) --len;
  lua_newtable(L);
  lua_pushstring(L, "err");
  lua_pushlstring(L, code, code_len);
  lua_pushstring(L, " ");
  lua_pushlstring(L, msg, len);
  lua_concat(L, 3);
  lua_settable(L, -3);
}

void MarkIgnoreStats(lua_State* L) {
  lua_pushstring(L, "ignore_error_stats_update");
  lua_pushboolean(L, 1);
  lua_settable(L, -3);
}

}  // namespace fake_redis_lua_internal

using fake_redis_lua_internal::MarkIgnoreStats;
using fake_redis_lua_internal::PushErrorBuff;

namespace {

// How deep a script's reply may nest (see LuaToReply).
constexpr int kMaxReplyDepth = 100;

// x86-64's conversion of an out-of-range double (what Redis's
// `(long long)lua_tonumber()` yields there): INT64_MIN.
int64_t DoubleToInt64(double d) {
  if (std::isnan(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0) {
    return INT64_MIN;
  }
  return static_cast<int64_t>(d);
}

std::string FormatDouble(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[128];
  int n = std::snprintf(buf, sizeof(buf), "%.17g", d);
  return std::string(buf, n);
}

std::string MapCrLf(std::string s) {
  for (char& c : s) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

// Redis reply -> Lua value (redisProtocolToLuaType).
namespace fake_redis_lua_internal {

void PushReply(lua_State* L, const Reply& r, std::string* scratch) {
  lua_checkstack(L, 4);
  switch (r.type) {
    case Reply::Type::kInteger:
      lua_pushnumber(L, static_cast<lua_Number>(r.integer));
      return;
    case Reply::Type::kString:
      lua_pushlstring(L, r.str.data(), r.str.size());
      return;
    case Reply::Type::kNil:
      lua_pushboolean(L, 0);
      return;
    case Reply::Type::kStatus:
      lua_newtable(L);
      lua_pushstring(L, "ok");
      lua_pushlstring(L, r.str.data(), r.str.size());
      lua_settable(L, -3);
      return;
    case Reply::Type::kError:
      scratch->assign("-");
      scratch->append(r.str);
      PushErrorBuff(L, scratch->c_str());
      MarkIgnoreStats(L);
      return;
    case Reply::Type::kArray:
      lua_newtable(L);
      for (size_t i = 0; i < r.elements.size(); ++i) {
        lua_pushnumber(L, static_cast<lua_Number>(i + 1));
        PushReply(L, r.elements[i], scratch);
        lua_settable(L, -3);
      }
      return;
  }
}

// Lua value on top of the stack -> Redis reply (luaReplyToRedisReply, with
// the script client in RESP2). Pops the value. Redis stops nesting when the
// Lua stack is full (thousands of levels, more than any client parses:
// hiredis refuses replies nested deeper than 7); the fake stops at
// kMaxReplyDepth to bound its own C++ recursion, with the same error.
Reply LuaToReply(lua_State* L, int depth) {
  if (depth > kMaxReplyDepth || !lua_checkstack(L, 4)) {
    lua_pop(L, 1);
    return Reply::Error("ERR reached lua stack limit");
  }
  Reply out;
  switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
      size_t len = 0;
      const char* s = lua_tolstring(L, -1, &len);
      out = Reply::String(std::string(s, len));
      break;
    }
    case LUA_TBOOLEAN:
      out = lua_toboolean(L, -1) ? Reply::Integer(1) : Reply::Nil();
      break;
    case LUA_TNUMBER:
      out = Reply::Integer(DoubleToInt64(lua_tonumber(L, -1)));
      break;
    case LUA_TTABLE: {
      lua_pushstring(L, "err");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TSTRING) {
        std::string msg = absl::StrCat("-", lua_tostring(L, -1));
        lua_pop(L, 2);
        return FormatError(std::move(msg));
      }
      lua_pop(L, 1);

      lua_pushstring(L, "ok");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TSTRING) {
        std::string ok = MapCrLf(lua_tostring(L, -1));
        lua_pop(L, 2);
        return Reply::Status(std::move(ok));
      }
      lua_pop(L, 1);

      lua_pushstring(L, "double");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TNUMBER) {
        std::string d = FormatDouble(lua_tonumber(L, -1));
        lua_pop(L, 2);
        return Reply::String(std::move(d));
      }
      lua_pop(L, 1);

      lua_pushstring(L, "big_number");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TSTRING) {
        size_t len = 0;
        const char* s = lua_tolstring(L, -1, &len);
        std::string n = MapCrLf(std::string(s, len));
        lua_pop(L, 2);
        return Reply::String(std::move(n));
      }
      lua_pop(L, 1);

      lua_pushstring(L, "verbatim_string");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TTABLE) {
        lua_pushstring(L, "format");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TSTRING) {
          lua_pushstring(L, "string");
          lua_rawget(L, -3);
          if (lua_type(L, -1) == LUA_TSTRING) {
            size_t len = 0;
            const char* s = lua_tolstring(L, -1, &len);
            Reply v = Reply::String(std::string(s, len));
            lua_pop(L, 4);
            return v;
          }
          lua_pop(L, 1);
        }
        lua_pop(L, 1);
      }
      lua_pop(L, 1);

      lua_pushstring(L, "map");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TTABLE) {
        std::vector<Reply> elements;
        lua_pushnil(L);
        while (lua_next(L, -2) != 0) {
          lua_pushvalue(L, -2);
          elements.push_back(LuaToReply(L, depth + 1));  // key
          elements.push_back(LuaToReply(L, depth + 1));  // value
        }
        lua_pop(L, 2);
        return Reply::Array(std::move(elements));
      }
      lua_pop(L, 1);

      lua_pushstring(L, "set");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TTABLE) {
        std::vector<Reply> elements;
        lua_pushnil(L);
        while (lua_next(L, -2) != 0) {
          lua_pop(L, 1);
          lua_pushvalue(L, -1);
          elements.push_back(LuaToReply(L, depth + 1));
        }
        lua_pop(L, 2);
        return Reply::Array(std::move(elements));
      }
      lua_pop(L, 1);

      std::vector<Reply> elements;
      for (int j = 1;; ++j) {
        lua_pushnumber(L, j);
        lua_rawget(L, -2);
        if (lua_isnil(L, -1)) {
          lua_pop(L, 1);
          break;
        }
        elements.push_back(LuaToReply(L, depth + 1));
      }
      out = Reply::Array(std::move(elements));
      break;
    }
    default:
      out = Reply::Nil();
      break;
  }
  lua_pop(L, 1);
  return out;
}

// The error of a failed script run (luaCallFunction's error branch).
Reply ErrorToReply(lua_State* L, const std::string& sha) {
  if (!lua_istable(L, -1)) {
    std::string msg = lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure";
    lua_pop(L, 1);
    return FormatError(
        absl::StrCat("Error running script ", sha, ", ", msg.substr(0, 100), "\n"));
  }
  const char* fields[] = {"err", "source", "line"};
  std::string values[3];
  bool present[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    lua_pushstring(L, fields[i]);
    lua_rawget(L, -2);
    if (lua_isstring(L, -1)) {
      present[i] = true;
      values[i] = lua_tostring(L, -1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!present[0]) {
    return Reply::Error(
        "ERR FakeRedis: the script raised an error table without an 'err' field "
        "(redis-server 7.0.15 crashes on this)");
  }
  std::string msg = values[0];
  if (present[1] && present[2]) {
    absl::StrAppend(&msg, " script: ", sha, ", on ", values[1], ":", values[2], ".");
  }
  return Reply::Error(std::move(msg));
}

}  // namespace fake_redis_lua_internal
}  // namespace dlock
