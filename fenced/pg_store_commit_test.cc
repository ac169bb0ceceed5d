// PgFencedStore's unknown-commit path on a real, private PostgreSQL
// (//testing:pg_server): the connection is lost after COMMIT was sent, and
// Write must learn the outcome from the server (pg_xact_status) instead of
// guessing -- applied when the transaction committed, nothing applied when
// it aborted, kUnknown while it is still running -- and never half-apply.
//
// How the tests stop a write exactly at its COMMIT: a deferred constraint
// trigger on `accounts` runs at COMMIT and waits for advisory lock 9, which
// the test's own connection holds. While the COMMIT waits there, the test
// cuts the write's connection (a FaultProxy between the store and the
// server: blackhole the reply, reset) or terminates its backend
// (pg_terminate_backend), then lets the commit go on or not.
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/pg_store.h"
#include "dlock/testing/pg_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/netfault/fault_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace fenced {
namespace {

using ::dlock::netfault::Direction;
using ::dlock::netfault::FaultProxy;
using ::dlock::netfault::FaultProxyOptions;
using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::PgServer;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

constexpr char kCharge[] = "UPDATE accounts SET balance = balance + $2 WHERE id = $1";

// The COMMIT of a fenced write that is waiting in the commit gate.
constexpr char kCommitWaiting[] =
    "SELECT count(*) FROM pg_stat_activity WHERE query = 'COMMIT' AND wait_event_type = 'Lock'";

class PgCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
    ASSERT_THAT(pg, IsOk());
    server_ = std::move(*pg);
    ASSERT_THAT(
        server_->Query(
            "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);"
            "INSERT INTO accounts VALUES ('a', 0);"
            "CREATE FUNCTION commit_gate() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_advisory_xact_lock(9); RETURN NULL; END $$;"
            "CREATE CONSTRAINT TRIGGER commit_gate AFTER UPDATE ON accounts "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION commit_gate()"),
        IsOk());
    FaultProxyOptions po;
    po.target_port = server_->port();
    absl::StatusOr<std::unique_ptr<FaultProxy>> proxy = FaultProxy::Start(po);
    ASSERT_THAT(proxy, IsOk());
    proxy_ = std::move(*proxy);
    // The store reaches the server through the proxy.
    PgStoreOptions o;
    o.conninfo = absl::StrCat("host=127.0.0.1 port=", proxy_->port(),
                              " user=postgres dbname=postgres connect_timeout=5");
    absl::StatusOr<std::unique_ptr<PgFencedStore>> store = PgFencedStore::Connect(o);
    ASSERT_THAT(store, IsOk());
    store_ = std::move(*store);
    ASSERT_THAT(store_->CreateFenceTable(), IsOk());
    // A first write with fence 1 (the gate is open).
    ASSERT_THAT(store_->Write("order:1", 1, kCharge, {"a", "1"}), IsOk());
  }

  void TearDown() override {
    if (writer_.joinable()) {
      (void)server_->Query("SELECT pg_advisory_unlock_all()");
      writer_.join();
    }
  }

  // Closes the gate, starts a fenced write of fence 2 (+100) on a thread of
  // its own and waits until its COMMIT waits in the gate.
  void StartWriteStoppedAtCommit() {
    ASSERT_THAT(server_->Query("SELECT pg_advisory_lock(9)"), IsOk());
    writer_ = std::thread([this] { result_ = store_->Write("order:1", 2, kCharge, {"a", "100"}); });
    AwaitValue(kCommitWaiting, "1");
  }

  // Polls the server (the test's own connection) until `sql` returns `want`:
  // waiting for another connection to reach a known state, bounded.
  void AwaitValue(const std::string& sql, const std::string& want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      absl::StatusOr<std::string> v = server_->QueryValue(sql);
      if (v.ok() && *v == want) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
    FAIL() << "timed out waiting for " << sql << " = " << want;
  }

  std::string Value(const std::string& sql) {
    absl::StatusOr<std::string> v = server_->QueryValue(sql);
    return v.ok() ? *v : v.status().ToString();
  }
  std::string Balance() { return Value("SELECT balance FROM accounts WHERE id = 'a'"); }
  std::string Fence() {
    return Value("SELECT fence FROM dlock_fences WHERE resource = 'order:1'");
  }

  std::unique_ptr<PgServer> server_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<PgFencedStore> store_;
  std::thread writer_;
  absl::StatusOr<PgResult> result_ = absl::UnknownError("not run");
};

// The server commits, but the reply to COMMIT never reaches the client and
// its connection is reset: Write reconnects, learns from pg_xact_status that
// the transaction committed, and reports it applied with the statement's
// result -- not an error a caller would retry (charging twice).
TEST_F(PgCommitTest, ReplyToCommitLostButCommittedIsApplied) {
  StartWriteStoppedAtCommit();
  proxy_->SetBlackhole(Direction::kToClient, true);
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(9)"), IsOk());
  // Committed (visible to another connection), the reply thrown away.
  AwaitValue("SELECT balance FROM accounts WHERE id = 'a'", "101");
  proxy_->ResetConnections();
  proxy_->Heal();
  writer_.join();
  ASSERT_THAT(result_, IsOk());
  EXPECT_EQ(result_->affected, 1);
  EXPECT_EQ(Balance(), "101");
  EXPECT_EQ(Fence(), "2");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(2));
}

// The write's backend is terminated while its COMMIT runs (the deferred
// trigger, before the commit record): the transaction aborts. Write
// reconnects, learns it aborted, and reports kUnavailable "nothing applied";
// neither the charge nor fence 2 is left. The same store writes again.
TEST_F(PgCommitTest, BackendKilledAtCommitIsNothingApplied) {
  StartWriteStoppedAtCommit();
  ASSERT_THAT(server_->Query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE query = 'COMMIT' AND wait_event_type = 'Lock'"),
              IsOk());
  writer_.join();
  EXPECT_THAT(result_, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(result_.status().message(), HasSubstr("aborted: nothing applied"));
  EXPECT_FALSE(IsStaleFence(result_.status()));
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(9)"), IsOk());
  EXPECT_EQ(Balance(), "1");
  EXPECT_EQ(Fence(), "1");
  EXPECT_THAT(store_->Write("order:1", 2, kCharge, {"a", "100"}), IsOk());
  EXPECT_EQ(Balance(), "101");
  EXPECT_EQ(Fence(), "2");
}

// The connection is lost while the COMMIT still waits: when Write asks, the
// transaction is still in progress, so the outcome really is unknown and
// Write says so (kUnknown, "check before retrying") rather than guessing.
// It was right not to report "nothing applied": the commit then goes on.
TEST_F(PgCommitTest, ConnectionLostWhileCommitStillRunsIsUnknown) {
  StartWriteStoppedAtCommit();
  proxy_->ResetConnections();
  writer_.join();
  EXPECT_THAT(result_, StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(result_.status().message(), HasSubstr("check before retrying"));
  EXPECT_EQ(Balance(), "1");
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(9)"), IsOk());
  AwaitValue("SELECT balance FROM accounts WHERE id = 'a'", "101");
  EXPECT_EQ(Fence(), "2");
}

}  // namespace
}  // namespace fenced
}  // namespace dlock
