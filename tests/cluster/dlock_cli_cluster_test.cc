// The `dlock` binary with a redis-cluster:// URL: `check` reports the
// cluster's state, its masters and replicas and each master's persistence
// and min-replicas-to-write;
// `trust` reads and sets the 16384 per-slot markers; `run` locks on it.
#include <stdio.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/testing/redis_cluster.h"
#include "dlock/transport/cluster_slot.h"

namespace dlock {
namespace {

using ::testing::HasSubstr;

struct Output {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

Output RunDlock(const std::string& args) {
  const std::string cmd =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/dlock/cli/dlock ", args, " 2>&1");
  Output o;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) o.out.append(buf, n);
  const int status = pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

TEST(DlockCliClusterTest, CheckTrustAndRun) {
  test_support::RedisClusterOptions options;
  options.trusted_data_set_prefixes.clear();  // `dlock trust` does it below
  auto cluster = test_support::RedisCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string url = absl::StrCat("--redis='", (*cluster)->url(), "'");

  // One master requires a replica's acknowledgement; the others keep the
  // default 0, which check warns about, once per master.
  const int strict_master = 0;  // redis-cli makes the first three masters
  ASSERT_TRUE(
      (*cluster)->Command(strict_master, {"CONFIG", "SET", "min-replicas-to-write", "1"}).ok());
  Output check = RunDlock(absl::StrCat("check ", url));
  ASSERT_TRUE(
      (*cluster)->Command(strict_master, {"CONFIG", "SET", "min-replicas-to-write", "0"}).ok());
  EXPECT_EQ(check.exit_code, 0) << check.out;  // warnings only
  for (int i = 0; i < 3; ++i) {
    const std::string header = absl::StrCat("master ", (*cluster)->node(i).address(), "\n");
    const size_t begin = check.out.find(header);
    ASSERT_NE(begin, std::string::npos) << check.out;
    const size_t end = check.out.find("\nmaster ", begin + header.size());
    const std::string section = check.out.substr(begin, end - begin);
    EXPECT_THAT(section, HasSubstr(i == strict_master
                                       ? "ok     min-replicas-to-write 1"
                                       : "WARN   min-replicas-to-write 0: a master cut off"))
        << section;
  }
  EXPECT_THAT(check.out, HasSubstr("cluster_state ok"));
  EXPECT_THAT(check.out, HasSubstr("all 16384 slots assigned and ok"));
  EXPECT_THAT(check.out, HasSubstr("3 masters serving slots, 3 other nodes"));
  EXPECT_THAT(check.out, HasSubstr("1 replica: a failover keeps its slots available"));
  for (int i = 0; i < 3; ++i) {  // redis-cli makes the first three masters
    EXPECT_THAT(check.out, HasSubstr(absl::StrCat("master ", (*cluster)->node(i).address(),
                                                  "\n  ok     version")));
  }
  EXPECT_THAT(check.out, HasSubstr("role master"));
  EXPECT_THAT(check.out, HasSubstr("persistence: appendonly no"));  // per master

  Output trust = RunDlock(absl::StrCat("trust ", url));
  EXPECT_NE(trust.exit_code, 0) << trust.out;  // untrusted: needs --force
  EXPECT_THAT(trust.out, HasSubstr("16384 slot markers: 0 trusted, 16384 absent"));
  trust = RunDlock(absl::StrCat("trust --force ", url));
  EXPECT_EQ(trust.exit_code, 0) << trust.out;
  EXPECT_THAT(trust.out, HasSubstr("16384 now trusted"));
  trust = RunDlock(absl::StrCat("trust ", url));
  EXPECT_EQ(trust.exit_code, 0) << trust.out;
  EXPECT_THAT(trust.out, HasSubstr("16384 trusted, 0 absent"));

  Output run = RunDlock(absl::StrCat("run ", url, " --ttl=5s orders/1 -- true"));
  EXPECT_EQ(run.exit_code, 0) << run.out;

  // unlock --force over the cluster: a resource's lock key and its readers
  // share the resource's slot, so one script on its master removes both.
  {
    auto owner = (*cluster)->OwnerOf(KeySlot("dlock:{orders/2}"));
    ASSERT_TRUE(owner.ok()) << owner.status();
    ASSERT_TRUE(
        (*cluster)->Command(*owner, {"SET", "dlock:{orders/2}", "tokA", "PX", "600000"}).ok());
    ASSERT_TRUE((*cluster)
                    ->Command(*owner, {"HSET", "dlock:{orders/2}:readers", "tokB",
                                       "99999999999999"})
                    .ok());
    Output unlock = RunDlock(absl::StrCat("unlock --force ", url, " orders/2"));
    EXPECT_EQ(unlock.exit_code, 0) << unlock.out;
    EXPECT_THAT(unlock.out, HasSubstr("removed held"));
    EXPECT_THAT(unlock.out, HasSubstr("; 1 reader;"));
    auto left = (*cluster)->Command(
        *owner, {"EXISTS", "dlock:{orders/2}", "dlock:{orders/2}:readers"});
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_EQ(left->integer, 0);
  }

  // A master killed: before the cluster notices, check reaches the others
  // and reports that one unreachable (not OK).
  auto master = (*cluster)->OwnerOf(0);
  ASSERT_TRUE(master.ok());
  ASSERT_TRUE((*cluster)->node(*master).Kill().ok());
  check = RunDlock(absl::StrCat("check ", url));
  EXPECT_EQ(check.exit_code, 69) << check.out;  // kExitUnavailable
  EXPECT_THAT(check.out, HasSubstr(absl::StrCat("master ", (*cluster)->node(*master).address(),
                                                "\n  UNREACHABLE")));
  EXPECT_THAT(check.out, HasSubstr("result: INCOMPLETE"));
}

}  // namespace
}  // namespace dlock
