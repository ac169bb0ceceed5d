#include "dlock/transport/fake/fake_redis_commands.h"

#include <cstddef>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/fake/fake_redis_session.h"

namespace dlock {
namespace fake_redis_internal {
namespace {

bool ArityOk(int arity, size_t argc) {
  return !((arity > 0 && static_cast<size_t>(arity) != argc) ||
           (arity < 0 && argc < static_cast<size_t>(-arity)));
}

// Redis's error for an unknown command or subcommand: at most 128 bytes of
// each name and argument (as C strings), CR/LF turned into spaces.
Reply UnknownError(std::string err) {
  for (char& c : err) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return Reply::Error(absl::StrCat("ERR ", err));
}

// commandCheckExistence's message for an unknown command.
Reply UnknownCommand(const Args& argv) {
  std::string args;
  for (size_t i = 1; i < argv.size() && args.size() < 128; ++i) {
    absl::string_view a = CStr(argv[i]);
    a = a.substr(0, 128 - args.size());
    absl::StrAppend(&args, "'", a, "' ");
  }
  return UnknownError(absl::StrCat("unknown command '", CStr(argv[0]).substr(0, 128),
                                   "', with args beginning with: ", args));
}

}  // namespace

// ---------------------------------------------------------------------------
// The log.

void CommandLog::Add(const CallContext& ctx, const Args& argv) {
  if (max_entries_ == 0) return;
  if (entries_.size() >= max_entries_) {
    entries_.erase(entries_.begin(),
                   entries_.begin() + static_cast<std::ptrdiff_t>(entries_.size() / 2 + 1));
  }
  entries_.push_back(FakeRedis::LogEntry{ctx.session_id, argv, ctx.from_script, clock_->NowMs()});
}

int64_t CommandLog::Count(absl::string_view command) const {
  int64_t n = 0;
  for (const FakeRedis::LogEntry& e : entries_) {
    if (absl::EqualsIgnoreCase(e.argv[0], command)) ++n;
  }
  return n;
}

// ---------------------------------------------------------------------------
// The table.

void CommandTable::Add(const std::string& name, int arity, uint32_t flags, Handler handler) {
  const size_t bar = name.find('|');
  Spec spec{name, arity, flags, std::move(handler), /*container=*/false};
  if (bar == std::string::npos) {
    commands_[name] = std::move(spec);
  } else {
    commands_.at(name.substr(0, bar)).container = true;
    subcommands_[name] = std::move(spec);
  }
}

const CommandTable::Spec* CommandTable::Lookup(const Args& argv, bool* container_miss) const {
  *container_miss = false;
  const std::string name = absl::AsciiStrToLower(argv[0]);
  auto it = commands_.find(name);
  if (it == commands_.end()) return nullptr;
  if (!it->second.container || argv.size() == 1) return &it->second;
  auto sub = subcommands_.find(absl::StrCat(name, "|", absl::AsciiStrToLower(argv[1])));
  if (sub != subcommands_.end()) return &sub->second;
  *container_miss = true;
  return nullptr;
}

std::vector<Reply> CommandTable::Dispatch(CallContext& ctx, Args argv) {
  if (argv.empty()) return {Reply::Error("ERR FakeRedis: empty command")};
  bool container_miss = false;
  const Spec* spec = Lookup(argv, &container_miss);
  if (spec == nullptr) {
    if (container_miss) {
      return {UnknownError(absl::StrCat("unknown subcommand '", CStr(argv[1]).substr(0, 128),
                                        "'. Try ", absl::AsciiStrToUpper(argv[0]), " HELP."))};
    }
    return {UnknownCommand(argv)};
  }
  if (!ArityOk(spec->arity, argv.size())) return {ArityError(spec->name)};
  // ACL (processCommand checks it after the arity, before the pub/sub
  // context): only PUBLISH and SUBSCRIBE take channels here.
  if (channels_denied_ && (spec->name == "publish" || spec->name == "subscribe")) {
    return {Reply::Error(
        "NOPERM this user has no permissions to access one of the channels used as "
        "arguments")};
  }
  if (ctx.session != nullptr && ctx.session->subscription_count() != 0 &&
      !(spec->flags & kPubSubContext)) {
    return {Reply::Error(absl::StrCat(
        "ERR Can't execute '", spec->name,
        "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed "
        "in this context"))};
  }
  log_->Add(ctx, argv);
  std::vector<Reply> replies;
  ctx.extra = &replies;
  Reply first = spec->handler(ctx, argv);
  ctx.extra = nullptr;
  replies.insert(replies.begin(), std::move(first));
  return replies;
}

std::optional<Reply> CommandTable::QueueError(const Args& argv) const {
  if (argv.empty()) return Reply::Error("ERR FakeRedis: empty command");
  bool container_miss = false;
  const Spec* spec = Lookup(argv, &container_miss);
  if (spec == nullptr) {
    if (container_miss) {
      return UnknownError(absl::StrCat("unknown subcommand '", CStr(argv[1]).substr(0, 128),
                                       "'. Try ", absl::AsciiStrToUpper(argv[0]), " HELP."));
    }
    return UnknownCommand(argv);
  }
  if (!ArityOk(spec->arity, argv.size())) return ArityError(spec->name);
  return std::nullopt;
}

Reply CommandTable::CallFromScript(CallContext& ctx, const Args& argv,
                                   std::string* script_error) {
  bool container_miss = false;
  const Spec* spec = Lookup(argv, &container_miss);
  if (spec == nullptr) {
    *script_error = "Unknown Redis command called from script";
    return Reply();
  }
  if (!ArityOk(spec->arity, argv.size())) {
    *script_error = "Wrong number of args calling Redis command from script";
    return Reply();
  }
  if (spec->flags & kNoScript) {
    *script_error = "This Redis command is not allowed from script";
    return Reply();
  }
  // scriptVerifyACL comes before the write checks.
  if (channels_denied_ && spec->name == "publish") {
    *script_error =
        "The user executing the script can't publish to the channel mentioned in the "
        "command";
    return Reply();
  }
  if (ctx.script_read_only && (spec->flags & (kWrite | kMayReplicate))) {
    *script_error = "Write commands are not allowed from read-only scripts.";
    return Reply();
  }
  log_->Add(ctx, argv);
  return spec->handler(ctx, argv);
}

}  // namespace fake_redis_internal
}  // namespace dlock
