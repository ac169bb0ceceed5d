// Internal to //transport/fake: FakeRedis's server, replication and admin
// command family (PING TIME INFO DBSIZE FLUSHALL WAIT ROLE) and the
// server's identity (its run id). Not a public API.
//
// Replication as `WAIT numreplicas timeout` sees it: the fake has no
// replicas, it pretends `n` replicas acknowledge every write at once (0 by
// default), so WAIT answers n without waiting. ROLE answers as a master
// with no replicas listed.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SERVER_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SERVER_H_

#include <string>

#include "dlock/transport/fake/fake_redis_commands.h"
#include "dlock/transport/fake/fake_redis_keyspace.h"
#include "dlock/transport/reply.h"

namespace dlock {
namespace fake_redis_internal {

class ServerCommands {
 public:
  // `clock` and `keyspace` must outlive the family.
  ServerCommands(const ServerClock* clock, Keyspace* keyspace);
  ServerCommands(const ServerCommands&) = delete;
  ServerCommands& operator=(const ServerCommands&) = delete;

  void Register(CommandTable* table);

  // A new run id (INFO's run_id), as after a restart.
  void NewRunId();
  const std::string& run_id() const { return run_id_; }
  void set_acknowledging_replicas(int n) { acknowledging_replicas_ = n; }

 private:
  Reply Ping(CallContext& ctx, const Args& argv);
  Reply Time(const Args& argv);
  Reply Info(const Args& argv);
  Reply Wait(const Args& argv);
  Reply Role(const Args& argv);
  Reply DbSize(const Args& argv);
  Reply FlushAll(const Args& argv);

  const ServerClock* clock_;
  Keyspace* keyspace_;
  std::string run_id_;
  int acknowledging_replicas_ = 0;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_SERVER_H_
