// Test helper (testonly): the script order guarantee of transport.h (issue
// 22) checked on a real server through one connection-level transport
// (HiredisTransport, TlsTransport): a script sent before another command on
// the connection runs before it, whatever the server's script cache holds,
// and a script whose cache entry was flushed under the connection is either
// sent again in order or reported kUnavailable -- never run behind a later
// command. `server` runs a command on the same server over another
// connection (the test's control connection).
#ifndef DLOCK_TRANSPORT_UV_SCRIPT_ORDER_CHECK_H_
#define DLOCK_TRANSPORT_UV_SCRIPT_ORDER_CHECK_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/script.h"
#include "dlock/transport/transport.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace script_order_check {

using ServerCommand = std::function<absl::StatusOr<Reply>(std::vector<std::string>)>;

// A token-checked SET NX and a compare-and-delete: the lock's acquire and
// release in miniature.
inline const Script& AcquireLike() {
  static const Script* s = new Script(
      "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 60000)",
      "09329db7b11bd22182e9bf69c5fe75d66f80ec8b");
  return *s;
}
inline const Script& ReleaseLike() {
  static const Script* s = new Script(
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
      "return 0",
      "2e47b373b4dbd63ee966d2eb9fe24ed6a138ad4e");
  return *s;
}

struct Outcome {
  std::optional<absl::StatusOr<Reply>> result;
};

// Sends acquire(key, token) and release(key, token) in the same loop turn
// (pipelined on the connection) and waits for both.
inline void AcquireThenRelease(Transport& t, test_support::UvTestLoop& loop, const std::string& key,
                               const std::string& token, Outcome* acquire, Outcome* release) {
  const absl::Duration timeout = absl::Seconds(10);
  ASSERT_TRUE(AcquireLike()
                  .Run(t, {key}, {token}, timeout,
                       [acquire](absl::StatusOr<Reply> r) { acquire->result = std::move(r); })
                  .ok());
  ASSERT_TRUE(ReleaseLike()
                  .Run(t, {key}, {token}, timeout,
                       [release](absl::StatusOr<Reply> r) { release->result = std::move(r); })
                  .ok());
  ASSERT_TRUE(loop.RunUntil(
      [&] { return acquire->result.has_value() && release->result.has_value(); }));
}

inline bool KeyExists(const ServerCommand& server, const std::string& key) {
  absl::StatusOr<Reply> r = server({"EXISTS", key});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() && r->integer == 1;
}

// The whole check; `t` must be a fresh transport on the server `server`
// talks to.
inline void ExpectScriptsKeepOrderAcrossScriptFlush(Transport& t, test_support::UvTestLoop& loop,
                                                    const ServerCommand& server) {
  // The constant SHA-1s above are checked against the server's.
  absl::StatusOr<Reply> sha = server({"SCRIPT", "LOAD", AcquireLike().source()});
  ASSERT_TRUE(sha.ok() && sha->str == AcquireLike().sha1()) << (sha.ok() ? sha->str : "");
  sha = server({"SCRIPT", "LOAD", ReleaseLike().source()});
  ASSERT_TRUE(sha.ok() && sha->str == ReleaseLike().sha1()) << (sha.ok() ? sha->str : "");

  // 1. SCRIPT FLUSH; another client loads the release script (it released
  //    a lock of its own): release cached, acquire not. Acquire + release
  //    pipelined on a connection that has loaded nothing yet.
  ASSERT_TRUE(server({"SCRIPT", "FLUSH"}).ok());
  ASSERT_TRUE(server({"SCRIPT", "LOAD", ReleaseLike().source()}).ok());
  ASSERT_TRUE(server({"CONFIG", "RESETSTAT"}).ok());
  {
    Outcome acquire, release;
    AcquireThenRelease(t, loop, "order:1", "t1", &acquire, &release);
    ASSERT_TRUE(acquire.result->ok()) << acquire.result->status();
    EXPECT_EQ(**acquire.result, Reply::Status("OK"));
    ASSERT_TRUE(release.result->ok()) << release.result->status();
    EXPECT_EQ(**release.result, Reply::Integer(1));
    EXPECT_FALSE(KeyExists(server, "order:1")) << "ghost key: the acquire ran after its release";
  }
  // 2. The same connection now believes both loaded. SCRIPT FLUSH under it,
  //    the release loaded again by another client: the acquire meets
  //    NOSCRIPT with the release already written behind it. It must not run
  //    after the release: kUnavailable, and no key.
  ASSERT_TRUE(server({"SCRIPT", "FLUSH"}).ok());
  ASSERT_TRUE(server({"SCRIPT", "LOAD", ReleaseLike().source()}).ok());
  {
    Outcome acquire, release;
    AcquireThenRelease(t, loop, "order:2", "t2", &acquire, &release);
    EXPECT_TRUE(!acquire.result->ok() && absl::IsUnavailable(acquire.result->status()))
        << (acquire.result->ok() ? acquire.result->value().DebugString()
                                 : acquire.result->status().ToString());
    ASSERT_TRUE(release.result->ok()) << release.result->status();
    EXPECT_EQ(**release.result, Reply::Integer(0));  // nothing to release
    EXPECT_FALSE(KeyExists(server, "order:2")) << "ghost key: the acquire ran after its release";
  }
  // 3. A flush with nothing sent after the script: sent again, transparently.
  ASSERT_TRUE(server({"SCRIPT", "FLUSH"}).ok());
  {
    Outcome acquire;
    ASSERT_TRUE(AcquireLike()
                    .Run(t, {"order:3"}, {"t3"}, absl::Seconds(10),
                         [&](absl::StatusOr<Reply> r) { acquire.result = std::move(r); })
                    .ok());
    ASSERT_TRUE(loop.RunUntil([&] { return acquire.result.has_value(); }));
    ASSERT_TRUE(acquire.result->ok()) << acquire.result->status();
    EXPECT_EQ(**acquire.result, Reply::Status("OK"));
    EXPECT_TRUE(KeyExists(server, "order:3"));
  }
  // Never EVAL: scripts are loaded with SCRIPT LOAD, which Redis >= 7.4
  // never evicts.
  absl::StatusOr<Reply> stats = server({"INFO", "commandstats"});
  ASSERT_TRUE(stats.ok());
  EXPECT_FALSE(absl::StrContains(stats->str, "cmdstat_eval:")) << stats->str;
  EXPECT_TRUE(absl::StrContains(stats->str, "cmdstat_script|load:")) << stats->str;
}

}  // namespace script_order_check
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_UV_SCRIPT_ORDER_CHECK_H_
