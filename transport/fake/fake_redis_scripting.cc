#include "dlock/transport/fake/fake_redis_scripting.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/fake/fake_redis_lua.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace fake_redis_internal {

int32_t Rand48::Next() {
  state_ = (state_ * 0x5DEECE66Dull + 0xB) & ((1ull << 48) - 1);
  return static_cast<int32_t>(state_ >> 17);
}

void Rand48::Seed(int32_t seed) {
  state_ = (static_cast<uint64_t>(static_cast<uint32_t>(seed)) << 16) | 0x330E;
}

ScriptingCommands::ScriptingCommands(CommandTable* commands, int64_t max_script_instructions)
    : commands_(commands), max_script_instructions_(max_script_instructions) {
  NewEngine();
}

ScriptingCommands::~ScriptingCommands() = default;

void ScriptingCommands::NewEngine() {
  lua_ = std::make_unique<FakeRedisLua>(commands_, &rand_, max_script_instructions_);
}

void ScriptingCommands::Register(CommandTable* table) {
  using S = ScriptingCommands;
  table->Add("eval", -3, kNoScript | kMayReplicate, this, &S::Eval);
  table->Add("evalsha", -3, kNoScript | kMayReplicate, this, &S::EvalSha);
  table->Add("script", -2, 0, this, &S::Script);
  table->Add("script|load", 3, kNoScript, this, &S::ScriptLoad);
  table->Add("script|exists", -3, kNoScript, this, &S::ScriptExists);
  table->Add("script|flush", -2, kNoScript | kWrite, this, &S::ScriptFlush);
}

void ScriptingCommands::Restart() {
  NewEngine();
  rand_.Reset();
}

std::vector<std::string> ScriptingCommands::CachedScripts() const { return lua_->Shas(); }

Reply ScriptingCommands::EvalGeneric(CallContext& ctx, const Args& argv, bool evalsha) {
  if (evalsha && argv[1].size() != 40) return NoScript();
  int64_t numkeys;
  if (!ParseInt64(argv[2], &numkeys)) return NotInteger();
  if (numkeys > static_cast<int64_t>(argv.size()) - 3) {
    return Reply::Error("ERR Number of keys can't be greater than number of args");
  }
  if (numkeys < 0) return Reply::Error("ERR Number of keys can't be negative");
  std::string sha = evalsha ? absl::AsciiStrToLower(argv[1]) : Sha1Hex(argv[1]);
  if (!lua_->Has(sha)) {
    if (evalsha) return NoScript();
    std::string error;
    if (!lua_->Load(argv[1], &sha, &error)) return Reply::Error(error);
  }
  Args keys(argv.begin() + 3, argv.begin() + 3 + numkeys);
  Args args(argv.begin() + 3 + numkeys, argv.end());
  return lua_->Run(sha, ctx, keys, args);
}

Reply ScriptingCommands::Script(const Args&) {
  // Only reached with argc == 1, which fails the arity check first.
  return ArityError("script");
}

Reply ScriptingCommands::ScriptLoad(const Args& argv) {
  std::string sha, error;
  if (!lua_->Load(argv[2], &sha, &error)) return Reply::Error(error);
  return Reply::String(sha);
}

Reply ScriptingCommands::ScriptExists(const Args& argv) {
  std::vector<Reply> out;
  for (size_t i = 2; i < argv.size(); ++i) {
    out.push_back(Reply::Integer(lua_->Has(absl::AsciiStrToLower(argv[i])) ? 1 : 0));
  }
  return Reply::Array(std::move(out));
}

Reply ScriptingCommands::ScriptFlush(const Args& argv) {
  if (!(argv.size() == 2 || (argv.size() == 3 && (absl::EqualsIgnoreCase(argv[2], "sync") ||
                                                   absl::EqualsIgnoreCase(argv[2], "async"))))) {
    return Reply::Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
  }
  NewEngine();
  return Ok();
}

}  // namespace fake_redis_internal
}  // namespace dlock
