// Internal to //transport/fake: the embedded Lua 5.1 engine of FakeRedis.
// Not a public API; include only from fake_redis*.cc and its tests.
//
// One `FakeRedisLua` is one Redis scripting environment: the lifecycle of a
// lua_State with Redis's libraries and global protection, the script cache
// (SHA-1 -> compiled function) and script runs (instruction limit, error
// handler). What scripts see of the server, the `redis` table and the
// redis.call bridge, is its `LuaCallBridge` (fake_redis_lua_bridge.h).
// SCRIPT FLUSH and a server restart replace the engine with a fresh one.
// Its C functions follow the bridge's rule on lua_error() and C++ frames
// (fake_redis_lua_bridge.h).
//
// Not thread-safe (like FakeRedis).
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_lua_bridge.h"
#include "dlock/transport/reply.h"

struct lua_State;

namespace dlock {

class FakeRedisLua {
 public:
  // redis.call runs on `commands`, math.random draws from `rand`; both must
  // outlive the engine. A run of more than `max_script_instructions` Lua VM
  // instructions is aborted (0: no limit).
  FakeRedisLua(fake_redis_internal::CommandTable* commands, fake_redis_internal::Rand48* rand,
               int64_t max_script_instructions);
  ~FakeRedisLua();

  FakeRedisLua(const FakeRedisLua&) = delete;
  FakeRedisLua& operator=(const FakeRedisLua&) = delete;

  // Whether a script with this lower-case SHA-1 is cached.
  bool Has(const std::string& sha) const { return scripts_.count(sha) != 0; }
  // Compiles and caches `body` (a no-op if cached). On success sets *sha;
  // on failure sets *error to the error reply text (without '-').
  bool Load(const std::string& body, std::string* sha, std::string* error);
  // Runs the cached script `sha` with KEYS/ARGV, as called by `caller`.
  Reply Run(const std::string& sha, const fake_redis_internal::CallContext& caller,
            const std::vector<std::string>& keys, const std::vector<std::string>& args);
  // The cached SHA-1s, sorted.
  std::vector<std::string> Shas() const;

  // Instruction accounting for the runaway-script limit (the count hook).
  bool CountInstructions(int64_t n);

 private:
  struct ScriptInfo {
    bool read_only = false;  // "#!lua flags=no-writes"
  };

  void Protect();

  // Declared before L_: the Lua state's closures point at it.
  fake_redis_internal::LuaCallBridge bridge_;
  lua_State* L_ = nullptr;
  int64_t max_script_instructions_;
  std::map<std::string, ScriptInfo> scripts_;

  int64_t instructions_ = 0;
  int gc_count_ = 0;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_LUA_H_
