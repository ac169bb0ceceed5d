#include "dlock/testing/sentinel_deployment.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"

namespace dlock {
namespace test_support {
namespace {

// Waiting on external processes: polled, bounded by `deadline`.
constexpr absl::Duration kPoll = absl::Milliseconds(20);

absl::StatusOr<std::string> MakeDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                   "/dlock-sentinel-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError("mkdtemp failed for the sentinel configs");
  }
  return templ;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentinelDeployment>> SentinelDeployment::Start(
    SentinelDeploymentOptions options) {
  if (options.replicas < 0 || options.sentinels < 1 || options.quorum < 1 ||
      options.quorum > options.sentinels) {
    return absl::InvalidArgumentError("bad SentinelDeployment options");
  }
  std::unique_ptr<SentinelDeployment> d(new SentinelDeployment(std::move(options)));
  const SentinelDeploymentOptions& o = d->options_;
  RedisServerOptions master;
  master.extra_args = o.data_extra_args;
  absl::StatusOr<std::unique_ptr<RedisServer>> m = RedisServer::Start(master);
  if (!m.ok()) return m.status();
  d->data_.push_back(*std::move(m));
  for (int i = 0; i < o.replicas; ++i) {
    RedisServerOptions replica;
    replica.extra_args = o.data_extra_args;
    replica.extra_args.insert(replica.extra_args.end(),
                              {"--replicaof", "127.0.0.1",
                               absl::StrCat(d->data_[0]->port())});
    replica.trusted_data_set_prefixes.clear();  // a replica refuses writes
    absl::StatusOr<std::unique_ptr<RedisServer>> r = RedisServer::Start(replica);
    if (!r.ok()) return r.status();
    d->data_.push_back(*std::move(r));
  }
  absl::Status s = d->WaitForReplicas(o.replicas);
  if (!s.ok()) return s;
  s = d->StartSentinels();
  if (!s.ok()) return s;
  s = d->WaitForSentinelsReady();
  if (!s.ok()) return s;
  return d;
}

SentinelDeployment::~SentinelDeployment() {
  sentinels_.clear();
  data_.clear();
  if (!conf_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(conf_dir_, ignored);
  }
}

absl::Status SentinelDeployment::StartSentinels() {
  absl::StatusOr<std::string> dir = MakeDir();
  if (!dir.ok()) return dir.status();
  conf_dir_ = *dir;
  for (int i = 0; i < options_.sentinels; ++i) {
    const std::string conf = absl::StrCat(conf_dir_, "/sentinel-", i, ".conf");
    std::ofstream out(conf);
    const std::string& name = options_.master_name;
    out << "sentinel monitor " << name << " 127.0.0.1 " << data_[0]->port() << " "
        << options_.quorum << "\n"
        << "sentinel down-after-milliseconds " << name << " "
        << absl::ToInt64Milliseconds(options_.down_after) << "\n"
        << "sentinel failover-timeout " << name << " "
        << absl::ToInt64Milliseconds(options_.failover_timeout) << "\n"
        << "sentinel parallel-syncs " << name << " 1\n";
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", conf));
    RedisServerOptions sentinel;
    sentinel.config_file = conf;
    sentinel.extra_args = {"--sentinel"};
    sentinel.trusted_data_set_prefixes.clear();
    absl::StatusOr<std::unique_ptr<RedisServer>> s = RedisServer::Start(sentinel);
    if (!s.ok()) return s.status();
    sentinels_.push_back(*std::move(s));
  }
  return absl::OkStatus();
}

absl::Status SentinelDeployment::WaitForSentinelsReady() {
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::string last;
  while (absl::Now() < deadline) {
    bool ready = true;
    for (auto& s : sentinels_) {
      absl::StatusOr<Reply> q = s->Command({"SENTINEL", "CKQUORUM", options_.master_name});
      absl::StatusOr<Reply> r = s->Command({"SENTINEL", "REPLICAS", options_.master_name});
      absl::StatusOr<Reply> o =
          s->Command({"SENTINEL", "SENTINELS", options_.master_name});
      if (!q.ok() || q->is_error() || !r.ok() || !r->is_array() ||
          static_cast<int>(r->elements.size()) != options_.replicas || !o.ok() ||
          !o->is_array() ||
          static_cast<int>(o->elements.size()) != options_.sentinels - 1) {
        ready = false;
        last = absl::StrCat("sentinel :", s->port(), " ",
                            q.ok() ? q->DebugString() : q.status().ToString());
        break;
      }
    }
    if (ready) return absl::OkStatus();
    absl::SleepFor(kPoll);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "sentinels did not learn the deployment in time: ", last, "\n",
      sentinels_.empty() ? "" : sentinels_[0]->LogTail()));
}

std::string SentinelDeployment::url() const {
  std::vector<std::string> hosts;
  for (const auto& s : sentinels_) hosts.push_back(absl::StrCat("127.0.0.1:", s->port()));
  return absl::StrCat("redis-sentinel://", absl::StrJoin(hosts, ","), "/",
                      options_.master_name);
}

int SentinelDeployment::IndexOfPort(int port) const {
  for (size_t i = 0; i < data_.size(); ++i) {
    if (data_[i]->port() == port) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<int> SentinelDeployment::MasterIndex() {
  absl::Status last = absl::UnavailableError("no sentinel running");
  for (auto& s : sentinels_) {
    if (!s->running()) continue;
    absl::StatusOr<Reply> r =
        s->Command({"SENTINEL", "get-master-addr-by-name", options_.master_name});
    int port = 0;
    if (r.ok() && r->is_array() && r->elements.size() == 2 &&
        absl::SimpleAtoi(r->elements[1].str, &port)) {
      const int index = IndexOfPort(port);
      if (index >= 0) return index;
    }
    last = r.ok() ? absl::InternalError(r->DebugString()) : r.status();
  }
  return last;
}

absl::Status SentinelDeployment::Failover() {
  absl::StatusOr<int> old = MasterIndex();
  if (!old.ok()) return old.status();
  absl::Status last = absl::UnavailableError("no sentinel running");
  const absl::Time deadline = absl::Now() + options_.timeout;
  // A sentinel refuses with -NOGOODSLAVE while its replica view is stale
  // (right after a previous failover); retry until the deadline.
  while (absl::Now() < deadline) {
    for (auto& s : sentinels_) {
      if (!s->running()) continue;
      absl::StatusOr<Reply> r = s->Command({"SENTINEL", "FAILOVER", options_.master_name});
      if (r.ok() && r->is_status()) {
        absl::StatusOr<int> now = WaitForNewMaster(*old);
        return now.status();
      }
      last = r.ok() ? absl::UnavailableError(r->str) : r.status();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return last;
}

absl::StatusOr<int> SentinelDeployment::WaitForNewMaster(int old_index) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    int agreed = -1;
    bool all = true;
    for (auto& s : sentinels_) {
      if (!s->running()) continue;
      absl::StatusOr<Reply> r =
          s->Command({"SENTINEL", "get-master-addr-by-name", options_.master_name});
      int port = 0;
      if (!r.ok() || !r->is_array() || r->elements.size() != 2 ||
          !absl::SimpleAtoi(r->elements[1].str, &port)) {
        all = false;
        break;
      }
      const int index = IndexOfPort(port);
      if (index < 0 || index == old_index || (agreed >= 0 && index != agreed)) {
        all = false;
        last = absl::StrCat("sentinel :", s->port(), " names :", port);
        break;
      }
      agreed = index;
    }
    if (all && agreed >= 0) {
      absl::StatusOr<Reply> role = data_[agreed]->Command({"ROLE"});
      if (role.ok() && role->is_array() && !role->elements.empty() &&
          role->elements[0].str == "master") {
        return agreed;
      }
      last = absl::StrCat("data node ", agreed, " not master yet");
    }
    absl::SleepFor(kPoll);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no new master within ", absl::FormatDuration(options_.timeout), ": ",
                   last));
}

absl::Status SentinelDeployment::WaitForReplicas(int n) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::string last;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> master = sentinels_.empty() ? absl::StatusOr<int>(0) : MasterIndex();
    if (master.ok()) {
      absl::StatusOr<Reply> info = data_[*master]->Command({"INFO", "replication"});
      if (info.ok() && info->is_string()) {
        int online = 0;
        for (size_t at = 0; (at = info->str.find("state=online", at)) != std::string::npos;
             ++at) {
          ++online;
        }
        if (online >= n) return absl::OkStatus();
        last = info->str;
      }
    }
    absl::SleepFor(kPoll);
  }
  return absl::DeadlineExceededError(absl::StrCat("replicas not in sync: ", last));
}

}  // namespace test_support
}  // namespace dlock
