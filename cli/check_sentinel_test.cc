#include "dlock/cli/check_sentinel.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;

SentinelFacts Healthy() {
  SentinelFacts f;
  f.master_name = "mymaster";
  f.master_address = "10.0.0.1:6379";
  f.replicas_online = 2;
  f.min_replicas_to_write = 1;
  f.sentinels_listed = 3;
  f.sentinels_reachable = 3;
  f.quorum_ok = true;
  f.quorum_answer = "OK 3 usable Sentinels";
  f.quorum = 2;
  f.sentinels_known = 3;
  return f;
}

auto Level(Finding::Level l) { return Field(&Finding::level, l); }

TEST(AnalyzeSentinelTest, HealthyDeploymentHasNoWarnings) {
  std::vector<Finding> f = AnalyzeSentinel(Healthy());
  EXPECT_THAT(f, Not(Contains(Level(Finding::Level::kWarning))));
  EXPECT_THAT(f, Not(Contains(Level(Finding::Level::kUnsafe))));
}

TEST(AnalyzeSentinelTest, NoQuorumIsUnsafe) {
  SentinelFacts s = Healthy();
  s.quorum_ok = false;
  s.quorum_answer = "NOQUORUM 1 usable Sentinels";
  EXPECT_THAT(AnalyzeSentinel(s),
              Contains(AllOf(Level(Finding::Level::kUnsafe),
                             Field(&Finding::message, HasSubstr("NOQUORUM")))));
}

TEST(AnalyzeSentinelTest, WarnsAboutMinReplicasToWriteNoReplicaAndFewSentinels) {
  SentinelFacts s = Healthy();
  s.min_replicas_to_write = 0;
  s.replicas_online = 0;
  s.sentinels_known = 2;
  s.sentinels_reachable = 2;
  std::vector<Finding> f = AnalyzeSentinel(s);
  for (const char* text : {"min-replicas-to-write 0", "no replica in sync",
                           "fewer than 3", "1 of 3 listed sentinels"}) {
    EXPECT_THAT(f, Contains(AllOf(Level(Finding::Level::kWarning),
                                  Field(&Finding::message, HasSubstr(text)))))
        << text;
  }
}

}  // namespace
}  // namespace cli
}  // namespace dlock
