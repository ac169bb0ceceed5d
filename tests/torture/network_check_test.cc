// Tests of the network checks on hand-made records: they decide whether a
// network torture run left a ghost key, so they are checked against known
// answers, including the cases they must NOT count.
#include "dlock/tests/torture/network_check.h"

#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

constexpr int64_t kMs = 1000000;

NetworkInput Base() {
  NetworkInput in;
  in.release_timeout_ns = 100 * kMs;
  in.ttl_ns = 1000 * kMs;
  CsRecord c;
  c.worker = 0;
  c.token = "t1";
  c.start_ns = 1000 * kMs;
  c.end_ns = 1010 * kMs;
  in.cs.push_back(c);
  ReleaseRecord rel;
  rel.token = "t1";
  rel.sent_ns = 1010 * kMs;
  rel.done_ns = 1012 * kMs;
  in.releases.push_back(rel);
  return in;
}

TEST(NetworkCheckTest, AKeyOfAReleasedLeaseAfterItsReleaseTimeoutIsAGhost) {
  NetworkInput in = Base();
  in.samples = {{0, 1005 * kMs, "t1"},   // held: fine
                {0, 1100 * kMs, "t1"},   // within the release timeout: fine
                {0, 1200 * kMs, "t1"},   // ghost
                {0, 1300 * kMs, "t1"}};  // the same ghost again
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.live_ghosts, 1);
  EXPECT_EQ(r.samples_judged, 4);
  EXPECT_EQ(r.ghosts(), 1);
  EXPECT_FALSE(r.examples.empty());
}

TEST(NetworkCheckTest, OtherServersCountSeparately) {
  NetworkInput in = Base();
  in.samples = {{0, 1200 * kMs, "t1"}, {1, 1200 * kMs, "t1"}};
  EXPECT_EQ(CheckNetwork(in).live_ghosts, 2);
}

TEST(NetworkCheckTest, AnInjectedDelayExtendsTheWait) {
  NetworkInput in = Base();
  in.impairments = {{0, 900 * kMs, 1050 * kMs, false, 300 * kMs}};
  // A release may take kRoundTrips round trips: 1012 + 100 + 4 x 300 > 2300.
  in.samples = {{0, 2300 * kMs, "t1"}};
  EXPECT_EQ(CheckNetwork(in).live_ghosts, 0);
  in.samples = {{0, 2400 * kMs, "t1"}};
  EXPECT_EQ(CheckNetwork(in).live_ghosts, 1);
}

TEST(NetworkCheckTest, ALossyFaultOnThatServerIsNotJudged) {
  NetworkInput in = Base();
  in.impairments = {{0, 1005 * kMs, 1020 * kMs, true, 0}};
  in.samples = {{0, 1500 * kMs, "t1"}, {1, 1500 * kMs, "t1"}};
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.live_ghosts, 1);  // server 1 only
  EXPECT_EQ(r.samples_judged, 1);
}

TEST(NetworkCheckTest, UnknownOrUnreleasedTokensAreLeftToTheAudits) {
  NetworkInput in = Base();
  in.releases.clear();
  in.samples = {{0, 5000 * kMs, "t1"}, {0, 5000 * kMs, "other"}};
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.live_ghosts, 0);
  EXPECT_EQ(r.samples_judged, 0);
  in.audits = 3;
  in.audit_findings = {{0, 6000 * kMs, "other", 900}};
  r = CheckNetwork(in);
  EXPECT_EQ(r.audits, 3);
  EXPECT_EQ(r.audit_ghosts, 1);
  EXPECT_EQ(r.ghosts(), 1);
}

TEST(NetworkCheckTest, AGhostSeenByAnAuditAndByLiveSamplesCountsOnce) {
  NetworkInput in = Base();
  in.samples = {{0, 1200 * kMs, "t1"}};
  in.audits = 1;
  in.audit_findings = {{0, 1300 * kMs, "t1", 700}, {1, 1300 * kMs, "t1", 700}};
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.live_ghosts, 1);
  EXPECT_EQ(r.audit_ghosts, 2);
  EXPECT_EQ(r.ghosts(), 2);
  // The same key found again by a later audit is the same ghost.
  in.audit_findings.push_back({0, 1500 * kMs, "t1", 500});
  r = CheckNetwork(in);
  EXPECT_EQ(r.audit_ghosts, 2);
  EXPECT_EQ(r.ghosts(), 2);
}

TEST(NetworkCheckTest, AnAuditAfterAResetOnThatServerCountsTheKeyApart) {
  NetworkInput in = Base();
  in.audits = 1;
  in.audit_findings = {{0, 1500 * kMs, "t1", 800}, {1, 1500 * kMs, "t1", 800}};
  in.impairments = {{0, 1005 * kMs, 1006 * kMs, true, 0, /*resets=*/true},
                    {1, 1005 * kMs, 1006 * kMs, true, 0, /*resets=*/false}};  // a stall
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.left_by_resets, 1);
  EXPECT_EQ(r.audit_ghosts, 1);  // server 1's stall held the release, never lost it
  // On a single server a release reported OK was applied: a reset then
  // excuses nothing.
  in.single_server = true;
  r = CheckNetwork(in);
  EXPECT_EQ(r.left_by_resets, 0);
  EXPECT_EQ(r.audit_ghosts, 2);
  in.releases[0].code = absl::StatusCode::kUnavailable;
  r = CheckNetwork(in);
  EXPECT_EQ(r.left_by_resets, 1);
  in.single_server = false;
  in.releases[0].code = absl::StatusCode::kOk;
  // A reset before the lease could exist (its grant - ttl) excuses nothing.
  in.ttl_ns = 100 * kMs;
  in.impairments = {{0, 800 * kMs, 850 * kMs, true, 0, true}};
  r = CheckNetwork(in);
  EXPECT_EQ(r.left_by_resets, 0);
  EXPECT_EQ(r.audit_ghosts, 2);
}

TEST(NetworkCheckTest, HandOverIsTheTimeFromAReleaseToTheNextGrant) {
  // 100 critical sections of 10 ms; each release is followed by the next
  // grant 1 ms later, once 50 ms later; the last release by none.
  NetworkInput in;
  int64_t t = 0;
  for (int i = 0; i < 100; ++i) {
    CsRecord c;
    c.start_ns = t;
    in.cs.push_back(c);
    ReleaseRecord rel;
    rel.sent_ns = t + 10 * kMs;
    in.releases.push_back(rel);
    t = rel.sent_ns + (i == 42 ? 50 : 1) * kMs;
  }
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.handovers, 99);
  EXPECT_DOUBLE_EQ(r.handover_p50_ms, 1);
  EXPECT_DOUBLE_EQ(r.handover_p99_ms, 50);
  EXPECT_DOUBLE_EQ(r.handover_max_ms, 50);
}

TEST(NetworkCheckTest, TimeAnAuditHeldAcquisitionsIsNotCounted) {
  NetworkInput in;
  CsRecord c;
  c.start_ns = 500 * kMs;
  in.cs.push_back(c);
  ReleaseRecord rel;
  rel.sent_ns = 100 * kMs;
  in.releases.push_back(rel);
  in.gates = {{200 * kMs, 450 * kMs}, {50 * kMs, 150 * kMs}, {600 * kMs, 700 * kMs}};
  NetworkReport r = CheckNetwork(in);
  EXPECT_EQ(r.handovers, 1);
  EXPECT_DOUBLE_EQ(r.handover_max_ms, 400 - 250 - 50);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
