#include "dlock/transport/fake/fake_redis_server.h"

#include <atomic>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dlock/transport/fake/fake_redis_internal.h"
#include "dlock/transport/fake/fake_redis_session.h"
#include "dlock/transport/script.h"

namespace dlock {
namespace fake_redis_internal {
namespace {

std::atomic<uint64_t> g_run_id_seq{0};

}  // namespace

ServerCommands::ServerCommands(const ServerClock* clock, Keyspace* keyspace)
    : clock_(clock), keyspace_(keyspace) {
  NewRunId();
}

void ServerCommands::NewRunId() {
  run_id_ = Sha1Hex(absl::StrCat("dlock-fake-redis-run-", g_run_id_seq.fetch_add(1), "-",
                                 reinterpret_cast<uintptr_t>(this)));
}

void ServerCommands::Register(CommandTable* table) {
  using S = ServerCommands;
  table->Add("ping", -1, kPubSubContext, this, &S::Ping);
  table->Add("time", 1, 0, this, &S::Time);
  table->Add("info", -1, 0, this, &S::Info);
  table->Add("wait", 3, kNoScript, this, &S::Wait);
  table->Add("role", 1, kNoScript, this, &S::Role);
  table->Add("dbsize", 1, 0, this, &S::DbSize);
  table->Add("flushall", -1, kWrite, this, &S::FlushAll);
}

Reply ServerCommands::Ping(CallContext& ctx, const Args& argv) {
  if (argv.size() > 2) return ArityError("ping");
  if (ctx.session != nullptr && ctx.session->subscription_count() != 0) {
    return Reply::Array(
        {Reply::String("pong"), Reply::String(argv.size() == 1 ? "" : argv[1])});
  }
  if (argv.size() == 1) return Reply::Status("PONG");
  return Reply::String(argv[1]);
}

Reply ServerCommands::Time(const Args&) {
  const int64_t us = absl::ToUnixMicros(clock_->Now());
  int64_t sec = us / 1000000, usec = us % 1000000;
  if (usec < 0) {
    usec += 1000000;
    --sec;
  }
  return Reply::Array({Reply::String(absl::StrCat(sec)), Reply::String(absl::StrCat(usec))});
}

Reply ServerCommands::Info(const Args& argv) {
  bool server = argv.size() == 1;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (Is(argv[i], "server") || Is(argv[i], "default") || Is(argv[i], "all") ||
        Is(argv[i], "everything")) {
      server = true;
    }
  }
  if (!server) return Reply::String("");
  const int64_t uptime_ms = absl::ToInt64Milliseconds(clock_->Uptime());
  return Reply::String(absl::StrCat(
      "# Server\r\n", "redis_version:7.0.15\r\n", "redis_mode:standalone\r\n",
      "os:dlock FakeRedis\r\n", "arch_bits:64\r\n", "run_id:", run_id_, "\r\n",
      "uptime_in_seconds:", uptime_ms / 1000, "\r\n",
      "uptime_in_days:", uptime_ms / 86400000, "\r\n"));
}

// WAIT numreplicas timeout: Redis checks both are integers (timeout >= 0)
// and answers how many replicas acknowledged this client's writes.
Reply ServerCommands::Wait(const Args& argv) {
  int64_t wanted = 0, timeout = 0;
  if (!absl::SimpleAtoi(argv[1], &wanted) || !absl::SimpleAtoi(argv[2], &timeout)) {
    return Reply::Error("ERR value is not an integer or out of range");
  }
  if (timeout < 0) return Reply::Error("ERR timeout is negative");
  return Reply::Integer(acknowledging_replicas_);
}

// ROLE on a master: ["master", replication offset, [replicas...]].
Reply ServerCommands::Role(const Args&) {
  return Reply::Array({Reply::String("master"), Reply::Integer(0), Reply::Array({})});
}

Reply ServerCommands::DbSize(const Args&) {
  return Reply::Integer(static_cast<int64_t>(keyspace_->Size()));
}

Reply ServerCommands::FlushAll(const Args& argv) {
  if (argv.size() > 2) return SyntaxError();
  if (argv.size() == 2 && !Is(argv[1], "sync") && !Is(argv[1], "async")) return SyntaxError();
  keyspace_->Clear();
  return Ok();
}

}  // namespace fake_redis_internal
}  // namespace dlock
