// Internal to //transport/fake: FakeRedis's command family for strings,
// keys and expiry (GET SET SETNX GETDEL DEL EXISTS TYPE ECHO INCR INCRBY
// DECR DECRBY PEXPIRE EXPIRE PTTL TTL PERSIST), worded as redis-server
// 7.0.15 answers them. Not a public API.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_STRINGS_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_STRINGS_H_

#include <cstdint>
#include <string>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

class StringCommands {
 public:
  // `keyspace` must outlive the family.
  explicit StringCommands(Keyspace* keyspace) : keyspace_(keyspace) {}
  void Register(CommandTable* table);

 private:
  Reply Get(const Args& argv);
  Reply Set(const Args& argv);
  Reply SetNx(const Args& argv);
  Reply GetDel(const Args& argv);
  Reply Del(const Args& argv);
  Reply Exists(const Args& argv);
  Reply Type(const Args& argv);
  Reply Echo(const Args& argv);
  Reply Incr(const Args& argv) { return IncrDecr(argv[1], 1); }
  Reply Decr(const Args& argv) { return IncrDecr(argv[1], -1); }
  Reply IncrBy(const Args& argv);
  Reply DecrBy(const Args& argv);
  Reply PExpire(const Args& argv) { return ExpireGeneric(argv, /*seconds=*/false); }
  Reply Expire(const Args& argv) { return ExpireGeneric(argv, /*seconds=*/true); }
  Reply PTtl(const Args& argv) { return TtlGeneric(argv[1], /*ms=*/true); }
  Reply Ttl(const Args& argv) { return TtlGeneric(argv[1], /*ms=*/false); }
  Reply Persist(const Args& argv);

  Reply IncrDecr(const std::string& key, int64_t by);
  Reply ExpireGeneric(const Args& argv, bool seconds);
  Reply TtlGeneric(const std::string& key, bool ms);

  Keyspace* keyspace_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_STRINGS_H_
