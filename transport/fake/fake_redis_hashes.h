// Internal to //transport/fake: FakeRedis's command family for hashes
// (HSET HGET HDEL HEXISTS HINCRBY HLEN HGETALL), fields kept in insertion
// order. Not a public API.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_HASHES_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_HASHES_H_

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

class HashCommands {
 public:
  // `keyspace` must outlive the family.
  explicit HashCommands(Keyspace* keyspace) : keyspace_(keyspace) {}
  void Register(CommandTable* table);

 private:
  Reply HSet(const Args& argv);
  Reply HGet(const Args& argv);
  Reply HDel(const Args& argv);
  Reply HExists(const Args& argv);
  Reply HIncrBy(const Args& argv);
  Reply HLen(const Args& argv);
  Reply HGetAll(const Args& argv);

  Keyspace* keyspace_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_HASHES_H_
