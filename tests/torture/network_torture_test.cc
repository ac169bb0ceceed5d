// The network torture run's short version (CI, well under 60 s): real worker
// processes and redis-servers with the faults on the network between them
// (network_driver.h): delays around the command timeout with the script
// cache flushed, connection resets, a holder cut off from its one server,
// from a minority and from a majority of RedLock's. Asserts, per scenario:
//   - no two holders at once (TTL 2-5 s, far above a 20 ms critical section;
//     the store is never faulted) and no lost update, fenced or not;
//   - 0 ghost keys: no lock key outlives its lease's release by more than
//     the release timeout (network_check.h);
//   - the run was not vacuous: faults injected, leases granted, audits done.
// Scenarios that cut links need a network namespace; where none can be
// made they are SKIPPED with the reason, never passed.
#include <cstdio>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "dlock/tests/torture/network_driver.h"
#include "gtest/gtest.h"

namespace dlock {
namespace torture {
namespace {

std::string WorkerPath() { return "tests/torture/torture_worker"; }

NetScenarioSpec Spec(std::string name, int servers, NetFault fault, int targets) {
  NetScenarioSpec s;
  s.name = std::move(name);
  s.lock_servers = servers;
  s.fault = fault;
  s.target_servers = targets;
  s.duration = absl::Seconds(5);
  return s;
}

// Every client's link to one of `servers` servers delayed 100-300 ms around
// the 200 ms command timeout, with SCRIPT FLUSHes, TTL 5 s.
NetScenarioSpec DelayedWithScriptFlushes(std::string name, int servers) {
  NetScenarioSpec s = Spec(std::move(name), servers, NetFault::kDelay, 1);
  s.holder_only = false;
  s.script_flush = true;
  s.ttl = absl::Seconds(5);
  s.jitter = absl::Milliseconds(200);
  return s;
}

void RunAndCheck(const NetScenarioSpec& spec) {
  absl::StatusOr<NetScenarioResult> r = RunNetworkScenario(spec, WorkerPath());
  if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << r.status().message();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf("%s", FormatNetworkTable({*r}).c_str());
  for (const std::string& e : r->net.examples) std::printf("  %s\n", e.c_str());
  EXPECT_GT(r->faults_injected, 0);
  EXPECT_GT(r->report.cs_attempted, 0) << "no lease granted";
  EXPECT_GT(r->net.audits, 1) << "no audit after a fault";
  EXPECT_EQ(r->report.overlaps, 0);
  EXPECT_EQ(r->report.lost_fenced, 0);
  EXPECT_EQ(r->report.lost_unfenced, 0);
  EXPECT_EQ(r->net.audit_ghosts, 0) << "lock keys left with nobody holding a lease";
  EXPECT_EQ(r->net.live_ghosts, 0) << "lock keys outlived their lease's release";
}

// A release that times out on the client (delays of 100-300 ms against a
// 200 ms command timeout) and then meets NOSCRIPT after a SCRIPT FLUSH, with
// later commands already written on its connection, never runs; the lock
// sends it again after the unknown outcome (SimpleLock::Release, RedLock's
// ReleaseOp::MaybeResend). Before that fix: 1 ghost in 1 of 3 runs.
TEST(NetworkTortureTest, SingleServerDelayedAroundTheCommandTimeoutWithScriptFlushes) {
  RunAndCheck(DelayedWithScriptFlushes("single, delay 100-300 ms, SCRIPT FLUSH, TTL 5 s", 1));
}

TEST(NetworkTortureTest, SingleServerConnectionResets) {
  NetScenarioSpec s = Spec("single, connection resets", 1, NetFault::kReset, 1);
  s.holder_only = false;
  s.fault_for = absl::Milliseconds(100);
  s.fault_every = absl::Milliseconds(300);
  s.duration = absl::Seconds(3);
  RunAndCheck(s);
}

TEST(NetworkTortureTest, SingleServerHolderCutOff) {
  NetScenarioSpec s = Spec("single, holder cut off", 1, NetFault::kCutHolder, 1);
  s.fault_for = absl::Milliseconds(1500);
  RunAndCheck(s);
}

// The same on RedLock's slow minority (see the single-server note above).
TEST(NetworkTortureTest, RedLock3SlowMinorityWithScriptFlushes) {
  RunAndCheck(DelayedWithScriptFlushes(
      "redlock 3, minority delayed 100-300 ms, SCRIPT FLUSH, TTL 5 s", 3));
}

TEST(NetworkTortureTest, RedLock3HolderCutFromAMinority) {
  NetScenarioSpec s = Spec("redlock 3, holder cut from 1 of 3", 3, NetFault::kCutHolder, 1);
  s.fault_for = absl::Milliseconds(2500);
  RunAndCheck(s);
}

TEST(NetworkTortureTest, RedLock3HolderCutFromAMajority) {
  NetScenarioSpec s = Spec("redlock 3, holder cut from 2 of 3", 3, NetFault::kCutHolder, 2);
  s.fault_for = absl::Milliseconds(2500);
  RunAndCheck(s);
}

}  // namespace
}  // namespace torture
}  // namespace dlock
