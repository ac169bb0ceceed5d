#include "dlock/testing/redis_cluster.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dlock/lock/keys.h"
#include "dlock/testing/server_child.h"
#include "dlock/transport/cluster_slot.h"

extern char** environ;

namespace dlock {
namespace test_support {
namespace {

// Runs argv (searched on PATH) to completion, stdout and stderr into `log`.
absl::Status RunTool(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return rc == ENOENT ? absl::NotFoundError(absl::StrCat(argv[0], " not on PATH"))
                        : ErrnoStatus(absl::StrCat("spawn ", argv[0]));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return absl::UnavailableError(
        absl::StrCat(absl::StrJoin(argv, " "), " failed (status ", status, "): ", text.str()));
  }
  return absl::OkStatus();
}

void Nap() { usleep(50 * 1000); }  // between polls of a converging cluster

}  // namespace

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(
    RedisClusterOptions options) {
  if (options.masters < 3) {
    return absl::InvalidArgumentError("redis-cli --cluster create needs 3 masters or more");
  }
  std::unique_ptr<RedisCluster> c(new RedisCluster(std::move(options)));
  const int n = c->options_.masters * (1 + c->options_.replicas_per_master);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<int> bus = PickFreeLoopbackPort();
    if (!bus.ok()) return bus.status();
    RedisServerOptions o;
    o.extra_args = {"--cluster-enabled", "yes", "--cluster-port", absl::StrCat(*bus),
                    "--cluster-node-timeout",
                    absl::StrCat(absl::ToInt64Milliseconds(c->options_.node_timeout))};
    o.extra_args.insert(o.extra_args.end(), c->options_.extra_args.begin(),
                        c->options_.extra_args.end());
    o.trusted_data_set_prefixes.clear();  // no slots yet: done by Trust()
    absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start(o);
    if (!s.ok()) return s.status();
    c->nodes_.push_back(*std::move(s));
    absl::StatusOr<Reply> id = c->Command(i, {"CLUSTER", "MYID"});
    if (!id.ok()) return id.status();
    c->ids_.push_back(id->str);
  }
  absl::Status s = c->Create();
  if (s.ok()) s = c->WaitHealthy();
  if (s.ok()) s = c->Trust();
  if (!s.ok()) return s;
  return c;
}

RedisCluster::~RedisCluster() = default;

absl::Status RedisCluster::Create() {
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (const auto& node : nodes_) argv.push_back(node->address());
  argv.insert(argv.end(), {"--cluster-replicas", absl::StrCat(options_.replicas_per_master),
                           "--cluster-yes"});
  return RunTool(argv, absl::StrCat(nodes_[0]->dir(), "/cluster-create.log"));
}

absl::Status RedisCluster::Trust() {
  if (options_.trusted_data_set_prefixes.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<int>> owners = SlotOwners(0);
  if (!owners.ok()) return owners.status();
  for (const std::string& prefix : options_.trusted_data_set_prefixes) {
    KeyScheme keys{prefix, true};
    for (const std::vector<std::string>& cmd : TrustClusterDataSetCommands(keys)) {
      const int owner = (*owners)[KeySlot(cmd[1])];
      absl::StatusOr<Reply> r = Command(owner, cmd);
      if (!r.ok()) return r.status();
      if (r->is_error()) return absl::InternalError(absl::StrCat("trust: ", r->str));
    }
  }
  return absl::OkStatus();
}

std::string RedisCluster::url() const {
  std::vector<std::string> seeds;
  for (const auto& node : nodes_) seeds.push_back(node->address());
  return absl::StrCat("redis-cluster://", absl::StrJoin(seeds, ","));
}

absl::StatusOr<Reply> RedisCluster::Command(int i, std::vector<std::string> argv) {
  return nodes_[i]->Command(std::move(argv));
}

int RedisCluster::IndexOfPort(int port) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<std::vector<int>> RedisCluster::SlotOwners(int asker) {
  absl::StatusOr<Reply> r = Command(asker, {"CLUSTER", "SLOTS"});
  if (!r.ok()) return r.status();
  if (!r->is_array()) return absl::InternalError(r->DebugString());
  std::vector<int> owners(kClusterSlots, -1);
  for (const Reply& range : r->elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
    const int owner = IndexOfPort(static_cast<int>(range.elements[2].elements[1].integer));
    for (int64_t s = range.elements[0].integer; s <= range.elements[1].integer; ++s) {
      owners[s] = owner;
    }
  }
  return owners;
}

absl::StatusOr<int> RedisCluster::OwnerOf(int slot, int asker) {
  absl::StatusOr<std::vector<int>> owners = SlotOwners(asker);
  if (!owners.ok()) return owners.status();
  if ((*owners)[slot] < 0) return absl::NotFoundError(absl::StrCat("slot ", slot, " unowned"));
  return (*owners)[slot];
}

absl::StatusOr<std::vector<int>> RedisCluster::Masters(int asker) {
  absl::StatusOr<std::vector<int>> owners = SlotOwners(asker);
  if (!owners.ok()) return owners.status();
  std::vector<int> masters;
  for (int i = 0; i < size(); ++i) {
    if (std::find(owners->begin(), owners->end(), i) != owners->end()) masters.push_back(i);
  }
  return masters;
}

absl::StatusOr<int> RedisCluster::ReplicaOf(int i) {
  absl::StatusOr<Reply> r = Command(i, {"CLUSTER", "REPLICAS", ids_[i]});
  if (!r.ok()) return r.status();
  for (const Reply& line : r->elements) {
    // "<id> <ip>:<port>@<bus> <flags> ..."
    std::vector<std::string> f = absl::StrSplit(line.str, ' ');
    if (f.size() < 3 || absl::StrContains(f[2], "fail")) continue;
    std::vector<std::string> addr = absl::StrSplit(f[1], absl::ByAnyChar(":@"));
    int port = 0;
    if (addr.size() >= 2 && absl::SimpleAtoi(addr[1], &port) && IndexOfPort(port) >= 0 &&
        nodes_[IndexOfPort(port)]->running()) {
      return IndexOfPort(port);
    }
  }
  return absl::NotFoundError(absl::StrCat("no live replica of node ", i));
}

absl::Status RedisCluster::WaitHealthy() {
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::string last;
  while (absl::Now() < deadline) {
    bool ok = true;
    std::vector<int> first;
    for (int i = 0; i < size() && ok; ++i) {
      if (!nodes_[i]->running() || nodes_[i]->paused()) continue;
      absl::StatusOr<Reply> info = Command(i, {"CLUSTER", "INFO"});
      if (!info.ok() || !absl::StrContains(info->str, "cluster_state:ok")) {
        last = absl::StrCat("node ", i, " not ok");
        ok = false;
        break;
      }
      absl::StatusOr<std::vector<int>> owners = SlotOwners(i);
      if (!owners.ok()) {
        ok = false;
        break;
      }
      if (first.empty()) {
        first = *owners;
      } else if (*owners != first) {
        last = absl::StrCat("node ", i, " disagrees on the slot map");
        ok = false;
      }
    }
    if (ok) {
      for (int owner : first) {
        if (owner < 0) ok = false;
      }
      if (!ok) last = "a slot has no reachable owner";
    }
    if (ok) {
      // Every running node that serves no slot is a replica, in every
      // running node's view (roles spread after the slots do).
      int running = 0, masters = 0;
      for (int i = 0; i < size(); ++i) {
        if (nodes_[i]->running() && !nodes_[i]->paused()) ++running;
        if (std::find(first.begin(), first.end(), i) != first.end()) ++masters;
      }
      for (int i = 0; i < size() && ok; ++i) {
        if (!nodes_[i]->running() || nodes_[i]->paused()) continue;
        absl::StatusOr<Reply> nodes = Command(i, {"CLUSTER", "NODES"});
        int replicas = 0;
        for (absl::string_view line : absl::StrSplit(nodes.ok() ? nodes->str : "", '\n')) {
          std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
          if (f.size() > 2 && absl::StrContains(f[2], "slave") &&
              !absl::StrContains(f[2], "fail")) {
            ++replicas;
          }
        }
        if (replicas != running - masters) {
          last = absl::StrCat("node ", i, " sees ", replicas, " live replicas, not ",
                              running - masters);
          ok = false;
        }
      }
      if (ok) return absl::OkStatus();
    }
    Nap();
  }
  return absl::UnavailableError(absl::StrCat("cluster not healthy within ",
                                             absl::FormatDuration(options_.timeout), ": ",
                                             last, "; node 0 log: ", nodes_[0]->LogTail()));
}

absl::Status RedisCluster::BeginSlotMigration(int slot, int to) {
  absl::StatusOr<int> from = OwnerOf(slot);
  if (!from.ok()) return from.status();
  const std::string s = absl::StrCat(slot);
  absl::StatusOr<Reply> r = Command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", ids_[*from]});
  if (r.ok() && r->is_error()) return absl::InternalError(r->str);
  if (!r.ok()) return r.status();
  r = Command(*from, {"CLUSTER", "SETSLOT", s, "MIGRATING", ids_[to]});
  if (r.ok() && r->is_error()) return absl::InternalError(r->str);
  return r.status();
}

absl::Status RedisCluster::MigrateKeys(int slot, int to) {
  absl::StatusOr<int> from = OwnerOf(slot);
  if (!from.ok()) return from.status();
  for (;;) {
    absl::StatusOr<Reply> keys =
        Command(*from, {"CLUSTER", "GETKEYSINSLOT", absl::StrCat(slot), "100"});
    if (!keys.ok()) return keys.status();
    if (keys->elements.empty()) return absl::OkStatus();
    std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", absl::StrCat(nodes_[to]->port()),
                                     "", "0", "5000", "KEYS"};
    for (const Reply& k : keys->elements) argv.push_back(k.str);
    absl::StatusOr<Reply> r = Command(*from, argv);
    if (!r.ok()) return r.status();
    if (r->is_error()) return absl::InternalError(absl::StrCat("MIGRATE: ", r->str));
  }
}

absl::Status RedisCluster::FinishSlotMigration(int slot, int to) {
  absl::StatusOr<int> from = OwnerOf(slot);
  if (!from.ok()) return from.status();
  const std::vector<std::string> cmd = {"CLUSTER", "SETSLOT", absl::StrCat(slot), "NODE",
                                        ids_[to]};
  // The importer first, then the old owner (Redis's documented order), then
  // the other masters, so none keeps pointing at the old owner for long.
  std::vector<int> order = {to, *from};
  for (int i = 0; i < size(); ++i) {
    if (i != to && i != *from && nodes_[i]->running()) order.push_back(i);
  }
  for (int i : order) {
    absl::StatusOr<Reply> role = Command(i, {"ROLE"});
    if (!role.ok()) return role.status();
    if (role->elements.empty() || role->elements[0].str != "master") continue;
    absl::StatusOr<Reply> r = Command(i, cmd);
    if (!r.ok()) return r.status();
    if (r->is_error()) return absl::InternalError(absl::StrCat("SETSLOT NODE: ", r->str));
  }
  return WaitHealthy();
}

absl::StatusOr<int> RedisCluster::Failover(int i) {
  absl::StatusOr<int> replica = ReplicaOf(i);
  if (!replica.ok()) return replica.status();
  const absl::Time deadline = absl::Now() + options_.timeout;
  // A manual failover gives up after 5 s (CLUSTER_MF_TIMEOUT) when the
  // election does not get a majority in time (a loaded machine, a replica
  // still syncing): ask again then.
  const absl::Duration attempt = std::max(absl::Seconds(6), 3 * options_.node_timeout);
  while (absl::Now() < deadline) {
    absl::StatusOr<Reply> r = Command(*replica, {"CLUSTER", "FAILOVER"});
    if (!r.ok()) return r.status();
    if (r->is_error() && absl::StrContains(r->str, "Master is down or failed")) {
      // A heartbeat came late (a loaded machine): the replica suspects its
      // master for a moment. Ask again once it has heard from it.
      Nap();
      continue;
    }
    if (r->is_error()) return absl::InternalError(absl::StrCat("CLUSTER FAILOVER: ", r->str));
    const absl::Time give_up = std::min(deadline, absl::Now() + attempt);
    while (absl::Now() < give_up) {
      absl::StatusOr<Reply> role = Command(*replica, {"ROLE"});
      if (role.ok() && !role->elements.empty() && role->elements[0].str == "master") {
        absl::Status s = WaitHealthy();
        if (!s.ok()) return s;
        return *replica;
      }
      Nap();
    }
  }
  return absl::UnavailableError(absl::StrCat("node ", *replica, " did not become master: ",
                                             nodes_[*replica]->LogTail()));
}

}  // namespace test_support
}  // namespace dlock
