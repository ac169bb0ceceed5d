// Internal to //transport/fake: FakeRedis's scripting command family (EVAL
// EVALSHA SCRIPT LOAD|EXISTS|FLUSH) and what outlives a script engine:
// Redis's math.random generator. The engine itself is FakeRedisLua
// (fake_redis_lua.h). Not a public API.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SCRIPTING_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SCRIPTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/reply.h"

namespace dlock {

class FakeRedisLua;

namespace fake_redis_internal {

// Redis's math.random generator (rand48): one state for every script,
// kept across SCRIPT FLUSH, reset by a restart.
class Rand48 {
 public:
  int32_t Next();
  void Seed(int32_t seed);
  void Reset() { state_ = kInitial; }

 private:
  static constexpr uint64_t kInitial = 0x1234ABCD330Eull;
  uint64_t state_ = kInitial;
};

class ScriptingCommands {
 public:
  // Scripts' redis.call runs on `commands`, which must outlive the family.
  // A script running more than `max_script_instructions` Lua VM
  // instructions is aborted (0: no limit).
  ScriptingCommands(CommandTable* commands, int64_t max_script_instructions);
  ~ScriptingCommands();
  ScriptingCommands(const ScriptingCommands&) = delete;
  ScriptingCommands& operator=(const ScriptingCommands&) = delete;

  void Register(CommandTable* table);
  // A server restart: the script cache is lost, math.random starts over.
  void Restart();
  // SHA-1s (lower-case hex) of the cached scripts, sorted.
  std::vector<std::string> CachedScripts() const;

 private:
  Reply Eval(CallContext& ctx, const Args& argv) { return EvalGeneric(ctx, argv, false); }
  Reply EvalSha(CallContext& ctx, const Args& argv) { return EvalGeneric(ctx, argv, true); }
  Reply Script(const Args& argv);
  Reply ScriptLoad(const Args& argv);
  Reply ScriptExists(const Args& argv);
  Reply ScriptFlush(const Args& argv);

  Reply EvalGeneric(CallContext& ctx, const Args& argv, bool evalsha);
  // A fresh engine: an empty script cache.
  void NewEngine();

  CommandTable* commands_;
  int64_t max_script_instructions_;
  Rand48 rand_;
  std::unique_ptr<FakeRedisLua> lua_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SCRIPTING_H_
