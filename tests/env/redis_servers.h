// This header defines the RedLock deployment kind for real-server tests:
// `StartRedisServers`, n private redis-servers (//testing:redis_server), each
// an independent master on a free loopback port, and `RedisUrl` to name one.
#ifndef DLOCK_TESTS_ENV_REDIS_SERVERS_H_
#define DLOCK_TESTS_ENV_REDIS_SERVERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dlock/testing/redis_server.h"

namespace dlock {
namespace test_support {

// Starts `n` private redis-servers with `options`. The first failure to
// start is returned.
absl::StatusOr<std::vector<std::unique_ptr<RedisServer>>> StartRedisServers(
    int n, const RedisServerOptions& options = {});

// "redis://127.0.0.1:<port>" of `server`.
std::string RedisUrl(const RedisServer& server);

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTS_ENV_REDIS_SERVERS_H_
