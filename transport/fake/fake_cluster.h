// This header defines `FakeCluster`, a Redis Cluster made of in-memory
// `FakeRedis` nodes, and `FakeClusterConnection`, one client connection to
// one of its nodes: a `Transport` that answers as a cluster node does, so a
// cluster client (ClusterTransport) is unit-tested in virtual time.
//
//   ManualEventLoop loop;
//   FakeCluster cluster(&loop, 3);          // "node0:7000".."node2:7002",
//                                           // slots split evenly
//   auto conn = cluster.Connect("node1:7001");   // a Transport
//
// What a connection to node N answers, decided when the command is sent and
// delivered after the connection's round trip (FakeTransport's timing):
//   CLUSTER SLOTS          the topology (masters only, no replicas)
//   ASKING                 +OK; the next command may be served for an
//                          importing slot
//   a command for slot S (first key; EVAL/EVALSHA: every KEYS entry):
//     S owned by N, not migrating       applied on N
//     S owned by N, migrating to T      applied when all its keys are on N;
//                                       ASK S T when none is; TRYAGAIN when
//                                       some are
//     S importing on N, after ASKING    applied when one key, or when all its
//                                       keys are on N; else TRYAGAIN
//     otherwise                         MOVED S <owner>
//   anything while SetDown(true)        CLUSTERDOWN The cluster is down
//   commands without keys               applied on N
// The state changes only when the test says so: Assign, BeginMigration,
// MoveKey, FinishMigration (SETSLOT NODE), SetDown, Failover (the node's
// data set moves to a fresh address, like a promoted replica with a full
// copy; the old address is gone: its connections fail with kUnavailable).
// Pub/sub is the node's own: a PUBLISH reaches subscribers of the node it
// ran on only (a real cluster broadcasts it).
//
// Not thread-safe: call only on the loop's thread.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_CLUSTER_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_CLUSTER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "dlock/transport/event_loop.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/transport.h"

namespace dlock {

class FakeClusterConnection;

class FakeCluster {
 public:
  // `nodes` masters named "node<i>:<7000+i>", the 16384 slots split evenly
  // in order.
  FakeCluster(EventLoop* loop, int nodes);
  ~FakeCluster();

  FakeCluster(const FakeCluster&) = delete;
  FakeCluster& operator=(const FakeCluster&) = delete;

  // A new connection to `address` ("host:port"); kUnavailable for an
  // address no node has (any more).
  absl::StatusOr<std::unique_ptr<Transport>> Connect(const std::string& address);

  std::vector<std::string> addresses() const;
  FakeRedis* node(const std::string& address);
  const std::string& OwnerOf(int slot) const { return owner_[slot]; }

  // Topology changes (the test plays the operator).
  void Assign(int first_slot, int last_slot, const std::string& address);
  void BeginMigration(int slot, const std::string& to);
  // Moves one key (string or hash, with its TTL) from the slot's owner to
  // the migration target.
  void MoveKey(const std::string& key);
  // SETSLOT NODE: the target owns the slot; migration state cleared.
  void FinishMigration(int slot);
  void SetDown(bool down) { down_ = down; }
  // The node at `address` is replaced by one at `new_address` holding the
  // same data set; every slot it owned moves with it. Connections to the
  // old address fail from now on.
  void Failover(const std::string& address, const std::string& new_address);

  // Every command a connection to `address` received, in order.
  const std::vector<std::vector<std::string>>& received(const std::string& address) {
    return received_[address];
  }

 private:
  friend class FakeClusterConnection;
  struct Migration {
    std::string to;
  };
  // The reply a node gives instead of running the command, if any.
  std::optional<Reply> Intercept(const std::string& address, bool asking,
                                 const std::vector<std::string>& argv);
  Reply SlotsReply() const;
  bool HasKey(const std::string& address, const std::string& key);

  EventLoop* const loop_;
  absl::flat_hash_map<std::string, std::unique_ptr<FakeRedis>> nodes_;
  std::vector<std::string> owner_;  // per slot
  absl::flat_hash_map<int, Migration> migrating_;
  absl::flat_hash_map<std::string, std::vector<std::vector<std::string>>> received_;
  // Connections, to fail those of a node that went away.
  std::vector<FakeClusterConnection*> connections_;
  bool down_ = false;
};

// One client connection to one FakeCluster node (see above). Made by
// FakeCluster::Connect; must not outlive the cluster.
class FakeClusterConnection : public Transport {
 public:
  FakeClusterConnection(FakeCluster* cluster, std::string address, FakeRedis* server);
  ~FakeClusterConnection() override;

  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override;
  // Answered like its EVALSHA (MOVED, ASK, ...); when served, the inner
  // FakeTransport's SendScript (loads the script first on a connection
  // that has not).
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration timeout, ReplyCallback callback) override;
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string channel, MessageCallback on_message,
      absl::AnyInvocable<void(absl::Status) &&> on_ready) override;
  absl::Status Connect(absl::AnyInvocable<void(absl::Status) &&> callback) override;
  void Close() override;
  bool connected() const override { return inner_.connected(); }
  size_t pending_commands() const override { return inner_.pending_commands(); }

  FakeTransport& inner() { return inner_; }
  const std::string& address() const { return address_; }

 private:
  friend class FakeCluster;
  FakeCluster* cluster_;
  const std::string address_;
  FakeTransport inner_;
  bool asking_ = false;
};

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_CLUSTER_H_
