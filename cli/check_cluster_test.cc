#include "dlock/cli/check_cluster.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char kInfoOk[] =
    "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n";
// Three masters, a replica for two of them; the third has none.
const char kNodes[] =
    "m1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
    "m2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922\n"
    "m3 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383 [42->-m1]\n"
    "r1 127.0.0.1:7003@17003 slave m1 0 0 1 connected\n"
    "r2 127.0.0.1:7004@17004 slave,fail m2 0 0 2 disconnected\n";

std::string Levels(const std::vector<Finding>& findings, Finding::Level level) {
  std::string out;
  for (const Finding& f : findings) {
    if (f.level == level) out += f.message + "\n";
  }
  return out;
}

TEST(CheckClusterTest, ParsesNodes) {
  ClusterFacts f = ParseClusterFacts(kInfoOk, kNodes);
  EXPECT_EQ(f.state, "ok");
  EXPECT_EQ(f.slots_assigned, 16384);
  ASSERT_EQ(f.nodes.size(), 5u);
  EXPECT_EQ(f.nodes[0].address, "127.0.0.1:7000");
  EXPECT_TRUE(f.nodes[0].master);
  EXPECT_EQ(f.nodes[0].slots, 5461);
  EXPECT_EQ(f.nodes[2].slots, 5461);  // the migration marker is not a slot
  EXPECT_FALSE(f.nodes[3].master);
  EXPECT_EQ(f.nodes[3].master_id, "m1");
  EXPECT_TRUE(f.nodes[4].failed);
}

TEST(CheckClusterTest, HealthyClusterWithAMasterWithoutLiveReplica) {
  std::vector<Finding> out = AnalyzeCluster(ParseClusterFacts(kInfoOk, kNodes));
  EXPECT_EQ(Levels(out, Finding::Level::kUnsafe), "");
  const std::string warnings = Levels(out, Finding::Level::kWarning);
  EXPECT_THAT(warnings, HasSubstr("replica 127.0.0.1:7004 is flagged failed"));
  EXPECT_THAT(warnings, HasSubstr("master 127.0.0.1:7001 (5462 slots) has no live replica"));
  EXPECT_THAT(warnings, HasSubstr("master 127.0.0.1:7002 (5461 slots) has no live replica"));
  EXPECT_THAT(Levels(out, Finding::Level::kInfo),
              HasSubstr("master 127.0.0.1:7000 (5461 slots), 1 replica"));
}

TEST(CheckClusterTest, FailedStateAndMissingSlotsAreUnsafe) {
  std::vector<Finding> out = AnalyzeCluster(ParseClusterFacts(
      "cluster_state:fail\r\ncluster_slots_assigned:10923\r\ncluster_slots_ok:10923\r\n",
      kNodes));
  const std::string unsafe = Levels(out, Finding::Level::kUnsafe);
  EXPECT_THAT(unsafe, HasSubstr("cluster_state fail"));
  EXPECT_THAT(unsafe, HasSubstr("slots assigned 10923"));
  out = AnalyzeCluster(ParseClusterFacts("", ""));
  EXPECT_THAT(Levels(out, Finding::Level::kUnsafe), HasSubstr("cluster_state unknown"));
}

// Each master's min-replicas-to-write, judged as the Sentinel check does,
// on top of the standalone rules.
TEST(CheckClusterTest, MasterMinReplicasToWrite) {
  ServerFacts f;
  f.address = "127.0.0.1:7000";
  f.version = "7.0.15";
  f.role = "master";
  f.maxmemory_policy = "noeviction";
  f.min_replicas_to_write = "0";
  std::vector<Finding> out = AnalyzeClusterMaster(f, absl::Seconds(10));
  EXPECT_THAT(Levels(out, Finding::Level::kWarning),
              HasSubstr("min-replicas-to-write 0: a master cut off from its replicas"));
  EXPECT_THAT(Levels(out, Finding::Level::kOk), HasSubstr("role master"));  // AnalyzeServer's

  f.min_replicas_to_write = "1";
  out = AnalyzeClusterMaster(f, absl::Seconds(10));
  EXPECT_THAT(Levels(out, Finding::Level::kWarning), Not(HasSubstr("min-replicas-to-write")));
  EXPECT_THAT(Levels(out, Finding::Level::kOk), HasSubstr("min-replicas-to-write 1"));

  for (const std::optional<std::string>& unknown :
       {std::optional<std::string>(), std::optional<std::string>("x")}) {
    f.min_replicas_to_write = unknown;
    out = AnalyzeClusterMaster(f, absl::Seconds(10));
    for (const Finding& finding : out) {
      EXPECT_THAT(finding.message, Not(HasSubstr("min-replicas-to-write")));
    }
  }
}

}  // namespace
}  // namespace cli
}  // namespace dlock
