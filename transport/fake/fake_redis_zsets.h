// Internal to //transport/fake: FakeRedis's command family for sorted sets
// (ZADD ZINCRBY ZREM ZCARD ZSCORE ZRANK ZRANGE ZRANGEBYSCORE
// ZREMRANGEBYSCORE ZREMRANGEBYRANK ZPOPMIN), as redis-server 7.0.15's
// t_zset.c answers them; see fake_redis_zsets.cc for what is left out. Not
// a public API.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_ZSETS_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_ZSETS_H_

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

class ZSetCommands {
 public:
  // `keyspace` must outlive the family.
  explicit ZSetCommands(Keyspace* keyspace) : keyspace_(keyspace) {}
  void Register(CommandTable* table);

 private:
  Reply ZAdd(const Args& argv) { return ZAddGeneric(argv, /*incr=*/false); }
  Reply ZIncrBy(const Args& argv) { return ZAddGeneric(argv, /*incr=*/true); }
  Reply ZRem(const Args& argv);
  Reply ZCard(const Args& argv);
  Reply ZScore(const Args& argv);
  Reply ZRank(const Args& argv);
  Reply ZRange(const Args& argv) { return ZRangeGeneric(argv, /*by_score_command=*/false); }
  Reply ZRangeByScore(const Args& argv) {
    return ZRangeGeneric(argv, /*by_score_command=*/true);
  }
  Reply ZRemRangeByScore(const Args& argv) { return ZRemRangeGeneric(argv, /*by_score=*/true); }
  Reply ZRemRangeByRank(const Args& argv) { return ZRemRangeGeneric(argv, /*by_score=*/false); }
  Reply ZPopMin(const Args& argv);

  Reply ZAddGeneric(const Args& argv, bool incr);
  Reply ZRangeGeneric(const Args& argv, bool by_score_command);
  Reply ZRemRangeGeneric(const Args& argv, bool by_score);

  Keyspace* keyspace_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_ZSETS_H_
