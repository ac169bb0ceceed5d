// FakeRedis commands: server and admin (pure move from fake_redis.cc).
#include "dlock/transport/fake/fake_redis.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/transport/fake/fake_redis_internal.h"

namespace dlock {

using fake_redis_internal::ArityError;
using fake_redis_internal::Is;
using fake_redis_internal::Ok;
using fake_redis_internal::SyntaxError;

// ---------------------------------------------------------------------------
// Server.

Reply FakeRedis::CmdPing(CallContext& ctx, const std::vector<std::string>& argv) {
  if (argv.size() > 2) return ArityError("ping");
  if (ctx.session != nullptr && !ctx.session->channels_.empty()) {
    return Reply::Array(
        {Reply::String("pong"), Reply::String(argv.size() == 1 ? "" : argv[1])});
  }
  if (argv.size() == 1) return Reply::Status("PONG");
  return Reply::String(argv[1]);
}

Reply FakeRedis::CmdTime(CallContext&, const std::vector<std::string>&) {
  const int64_t us =
      absl::ToUnixMicros(options_.start_time + (loop_->Now() - loop_origin_) + jump_);
  int64_t sec = us / 1000000, usec = us % 1000000;
  if (usec < 0) {
    usec += 1000000;
    --sec;
  }
  return Reply::Array({Reply::String(absl::StrCat(sec)), Reply::String(absl::StrCat(usec))});
}

Reply FakeRedis::CmdInfo(CallContext&, const std::vector<std::string>& argv) {
  bool server = argv.size() == 1;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (Is(argv[i], "server") || Is(argv[i], "default") || Is(argv[i], "all") ||
        Is(argv[i], "everything")) {
      server = true;
    }
  }
  if (!server) return Reply::String("");
  const int64_t uptime_ms = absl::ToInt64Milliseconds(loop_->Now() - loop_origin_);
  return Reply::String(absl::StrCat(
      "# Server\r\n", "redis_version:7.0.15\r\n", "redis_mode:standalone\r\n",
      "os:dlock FakeRedis\r\n", "arch_bits:64\r\n", "run_id:", run_id_, "\r\n",
      "uptime_in_seconds:", uptime_ms / 1000, "\r\n",
      "uptime_in_days:", uptime_ms / 86400000, "\r\n"));
}

Reply FakeRedis::CmdDbSize(CallContext&, const std::vector<std::string>&) {
  return Reply::Integer(static_cast<int64_t>(DbSize()));
}

Reply FakeRedis::CmdFlushAll(CallContext&, const std::vector<std::string>& argv) {
  if (argv.size() > 2) return SyntaxError();
  if (argv.size() == 2 && !Is(argv[1], "sync") && !Is(argv[1], "async")) return SyntaxError();
  db_.clear();
  return Ok();
}

}  // namespace dlock
