// PgFencedStore on a real, private PostgreSQL (//testing:pg_server): the
// fence rule, concurrent transactions on two connections, bad input, and the
// server refusing, restarting or dying in the middle of a fenced write.
#include "dlock/fenced/pg_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/testing/pg_server.h"
#include "dlock/testing/redis_process.h"
#include "dlock/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace fenced {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::IsOkAndHolds;
using ::dlock::test_support::PgServer;
using ::dlock::test_support::StatusIs;
using ::testing::HasSubstr;

constexpr char kCharge[] = "UPDATE accounts SET balance = balance + $2 WHERE id = $1";

// A user's read-modify-write, as docs/fencing-postgres.md shows it (the doc
// copies these lines; tools/check_readme_snippets keeps them equal).
// Charges order `id` once, as the holder of the lock on "order:<id>" whose
// lease has `fence`. The read and the write both go through the store.
absl::Status ChargeOnce(PgFencedStore& db, const std::string& id, int64_t fence) {
  const std::string resource = "order:" + id;
  auto order = db.Write(resource, fence, "SELECT status FROM orders WHERE id = $1", {id});
  if (!order.ok()) return order.status();  // stale: a newer holder has been here
  if (order->rows.empty() || order->rows[0][0] != "pending") return absl::OkStatus();
  // A long pause here is harmless: a newer holder's read makes this write stale.
  auto paid = db.Write(resource, fence,
                       "UPDATE orders SET status = 'paid', charged = charged + 1 WHERE id = $1",
                       {id});
  return paid.status();  // IsStaleFence(paid.status()): nothing was applied
}


class PgFencedStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
    ASSERT_THAT(pg, IsOk());
    server_ = pg->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_THAT(server_->Query("DROP TABLE IF EXISTS accounts, dlock_fences, fence_log;"
                               "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint "
                               "NOT NULL CHECK (balance >= 0));"
                               "INSERT INTO accounts VALUES ('a', 0), ('b', 0);"
                               "CREATE TABLE fence_log (seq bigserial PRIMARY KEY, fence bigint)"),
                IsOk());
    store_ = NewStore();
    ASSERT_NE(store_, nullptr);
    ASSERT_THAT(store_->CreateFenceTable(), IsOk());
  }

  static std::unique_ptr<PgFencedStore> NewStore(PgStoreOptions options = {}) {
    if (options.conninfo.empty()) options.conninfo = server_->conninfo();
    absl::StatusOr<std::unique_ptr<PgFencedStore>> s = PgFencedStore::Connect(options);
    EXPECT_THAT(s, IsOk());
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::string Balance(const std::string& id) {
    absl::StatusOr<std::string> v =
        server_->QueryValue(absl::StrCat("SELECT balance FROM accounts WHERE id = '", id, "'"));
    return v.ok() ? *v : v.status().ToString();
  }

  // Polls the server until `sql` (a count) returns `want`: waiting for
  // another connection to reach a known state, bounded.
  void AwaitCount(const std::string& sql, const std::string& want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      absl::StatusOr<std::string> v = server_->QueryValue(sql);
      if (v.ok() && *v == want) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
    FAIL() << "timed out waiting for " << sql << " = " << want;
  }

  // Waits until some connection waits on a row lock (a FOR UPDATE).
  void AwaitRowLockWaiter() {
    AwaitCount(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event IN ('transactionid', 'tuple')",
        "1");
  }
  // Waits until some connection waits on advisory lock 7.
  void AwaitAdvisoryWaiter() {
    AwaitCount("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", "1");
  }

  static PgServer* server_;
  std::unique_ptr<PgFencedStore> store_;
};

PgServer* PgFencedStoreTest::server_ = nullptr;

// A charge that first waits for advisory lock 7 (held by the test's own
// connection), so the fenced transaction stays open, its fence row locked,
// until the test lets it go.
constexpr char kStalledCharge[] =
    "WITH gate AS (SELECT pg_advisory_xact_lock(7)) "
    "UPDATE accounts SET balance = balance + $2 FROM gate WHERE id = $1";

TEST_F(PgFencedStoreTest, WriteAppliesAndRecordsTheFenceOfANewResource) {
  EXPECT_THAT(store_->HighestFence("order:1"), StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<PgResult> r = store_->Write("order:1", 3, kCharge, {"a", "10"});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->affected, 1);
  EXPECT_EQ(Balance("a"), "10");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(3));
}

TEST_F(PgFencedStoreTest, WriteReturnsTheStatementsRows) {
  absl::StatusOr<PgResult> r =
      store_->Write("order:1", 1, std::string(kCharge) + " RETURNING balance, NULL", {"a", "4"});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(r->rows[0][0], absl::optional<std::string>("4"));
  EXPECT_EQ(r->rows[0][1], absl::nullopt);
}

TEST_F(PgFencedStoreTest, LowerFenceIsStaleAndNothingApplied) {
  ASSERT_THAT(store_->Write("order:1", 5, kCharge, {"a", "10"}), IsOk());
  absl::StatusOr<PgResult> r = store_->Write("order:1", 4, kCharge, {"a", "10"});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsStaleFence(r.status()));
  EXPECT_EQ(HighestSeenFence(r.status()), absl::optional<int64_t>(5));
  EXPECT_THAT(r.status().message(), HasSubstr("stale fence 4 < highest 5"));
  EXPECT_EQ(Balance("a"), "10");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(5));
}

TEST_F(PgFencedStoreTest, EqualFenceAppliesAndHigherFenceRaisesTheHighest) {
  ASSERT_THAT(store_->Write("order:1", 5, kCharge, {"a", "1"}), IsOk());
  ASSERT_THAT(store_->Write("order:1", 5, kCharge, {"a", "1"}), IsOk());
  ASSERT_THAT(store_->Write("order:1", 9, kCharge, {"a", "1"}), IsOk());
  EXPECT_EQ(Balance("a"), "3");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(9));
  EXPECT_TRUE(IsStaleFence(store_->Write("order:1", 5, kCharge, {"a", "1"}).status()));
}

TEST_F(PgFencedStoreTest, TheDocsReadModifyWriteChargesOnceAndRefusesAStaleHolder) {
  ASSERT_THAT(server_->Query("CREATE TABLE orders (id text PRIMARY KEY, status text, charged int);"
                             "INSERT INTO orders VALUES ('1001', 'pending', 0), "
                             "('1002', 'pending', 0)"),
              IsOk());
  EXPECT_THAT(ChargeOnce(*store_, "1001", 1), IsOk());
  EXPECT_THAT(ChargeOnce(*store_, "1001", 1), IsOk());  // already paid: nothing to do
  EXPECT_THAT(server_->QueryValue("SELECT charged FROM orders WHERE id = '1001'"),
              IsOkAndHolds(std::string("1")));
  // A newer holder (fence 5) has read order 1002; the old one (fence 4) is refused.
  ASSERT_THAT(store_->Write("order:1002", 5, "SELECT 1"), IsOk());
  absl::Status stale = ChargeOnce(*store_, "1002", 4);
  EXPECT_TRUE(IsStaleFence(stale)) << stale;
  EXPECT_THAT(server_->QueryValue("SELECT charged FROM orders WHERE id = '1002'"),
              IsOkAndHolds(std::string("0")));
  EXPECT_THAT(ChargeOnce(*store_, "1002", 0), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(server_->Query("DROP TABLE orders"), IsOk());
}

// Read-modify-write: the newer holder's fenced read already shuts the older
// holder out, before the newer one writes anything.
TEST_F(PgFencedStoreTest, FencedReadRefusesAnOlderHoldersLaterWrite) {
  ASSERT_THAT(store_->Write("order:1", 1, "SELECT balance FROM accounts WHERE id = $1", {"a"}),
              IsOk());  // A (fence 1) reads, then is paused
  absl::StatusOr<PgResult> b_read =
      store_->Write("order:1", 2, "SELECT balance FROM accounts WHERE id = $1", {"a"});
  ASSERT_THAT(b_read, IsOk());  // B (fence 2) reads
  ASSERT_EQ(b_read->rows.size(), 1u);
  EXPECT_EQ(b_read->rows[0][0], absl::optional<std::string>("0"));
  // A resumes and writes: refused, although B has not written yet.
  EXPECT_TRUE(IsStaleFence(
      store_->Write("order:1", 1, "UPDATE accounts SET balance = 1 WHERE id = 'a'").status()));
  EXPECT_THAT(store_->Write("order:1", 2, "UPDATE accounts SET balance = 1 WHERE id = 'a'"),
              IsOk());
  EXPECT_EQ(Balance("a"), "1");
}

TEST_F(PgFencedStoreTest, FenceZeroNegativeAndEmptyResourceAreInvalidAndSendNothing) {
  EXPECT_THAT(store_->Write("order:1", 0, kCharge, {"a", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->Write("order:1", -3, kCharge, {"a", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->Write("", 1, kCharge, {"a", "1"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->HighestFence(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Balance("a"), "0");
  EXPECT_THAT(server_->QueryValue("SELECT count(*) FROM dlock_fences"),
              IsOkAndHolds(std::string("0")));
}

// Fences are per resource: another resource's (higher) fence does not make
// this one's holder stale, and a fence taken for another resource is judged
// against this resource's highest -- refused when lower.
TEST_F(PgFencedStoreTest, FenceFromAnotherResourceIsJudgedAgainstThisResourcesHighest) {
  ASSERT_THAT(store_->Write("order:1", 40, kCharge, {"a", "1"}), IsOk());
  ASSERT_THAT(store_->Write("order:2", 2, kCharge, {"b", "1"}), IsOk());
  absl::StatusOr<PgResult> r = store_->Write("order:1", 2, kCharge, {"a", "1"});
  EXPECT_TRUE(IsStaleFence(r.status())) << r.status();
  EXPECT_EQ(HighestSeenFence(r.status()), absl::optional<int64_t>(40));
  EXPECT_THAT(r.status().message(), HasSubstr("order:1"));
  EXPECT_EQ(Balance("a"), "1");
  EXPECT_THAT(store_->HighestFence("order:2"), IsOkAndHolds(2));
}

TEST_F(PgFencedStoreTest, MissingTableIsNotFoundAndTheFenceIsNotRecorded) {
  absl::StatusOr<PgResult> r =
      store_->Write("order:1", 1, "UPDATE no_such_table SET x = 1 WHERE id = $1", {"a"});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(r.status().message(), HasSubstr("no_such_table"));
  EXPECT_THAT(store_->HighestFence("order:1"), StatusIs(absl::StatusCode::kNotFound));
  // The store is still usable.
  EXPECT_THAT(store_->Write("order:1", 1, kCharge, {"a", "1"}), IsOk());
}

TEST_F(PgFencedStoreTest, MissingFenceTableIsNotFoundAndTheStatementDoesNotRun) {
  ASSERT_THAT(server_->Query("DROP TABLE dlock_fences"), IsOk());
  absl::StatusOr<PgResult> r = store_->Write("order:1", 1, kCharge, {"a", "1"});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(r.status().message(), HasSubstr("CreateFenceTable"));
  EXPECT_EQ(Balance("a"), "0");
  EXPECT_THAT(store_->HighestFence("order:1"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(PgFencedStoreTest, BadFenceTableNameIsInvalidArgument) {
  PgStoreOptions o;
  o.conninfo = server_->conninfo();
  o.fence_table = "fences; DROP TABLE accounts";
  EXPECT_THAT(PgFencedStore::Connect(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.fence_table = "public.my_fences";
  absl::StatusOr<std::unique_ptr<PgFencedStore>> s = PgFencedStore::Connect(o);
  ASSERT_THAT(s, IsOk());
  ASSERT_THAT((*s)->CreateFenceTable(), IsOk());
  EXPECT_THAT((*s)->Write("r", 1, kCharge, {"a", "1"}), IsOk());
  EXPECT_THAT(server_->QueryValue("SELECT fence FROM public.my_fences WHERE resource = 'r'"),
              IsOkAndHolds(std::string("1")));
}

TEST_F(PgFencedStoreTest, ParametersAreNeverPastedIntoSql) {
  const std::string evil = "a'; DROP TABLE accounts; --";
  ASSERT_THAT(store_->Write(evil, 1, kCharge, {evil, "1"}), IsOk());
  EXPECT_EQ(Balance("a"), "0");
  EXPECT_THAT(store_->HighestFence(evil), IsOkAndHolds(1));
}

TEST_F(PgFencedStoreTest, ConstraintViolationRollsBackAndIsNotStale) {
  absl::StatusOr<PgResult> r = store_->Write("stock:1", 1, kCharge, {"a", "-1"});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(IsStaleFence(r.status()));
  EXPECT_THAT(store_->HighestFence("stock:1"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(PgFencedStoreTest, SyntaxErrorIsInvalidArgument) {
  EXPECT_THAT(store_->Write("r", 1, "UPDATE accounts SET", {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->HighestFence("r"), StatusIs(absl::StatusCode::kNotFound));
}

// The race the fence row lock exists for: holder A (fence 1, paused past its
// TTL) and holder B (fence 2) write at the same time. Whoever locks the fence
// row first makes the other wait; a lower fence can never commit after a
// higher one.
TEST_F(PgFencedStoreTest, LowerFenceWaitingBehindAHigherOneIsRefusedWhenItCommits) {
  // The resource's fence row exists already (A wrote with fence 1 before
  // its pause), so the row lock, not the insert, must make A wait.
  ASSERT_THAT(store_->Write("order:1", 1, kCharge, {"b", "1"}), IsOk());
  std::unique_ptr<PgFencedStore> a = NewStore();
  std::unique_ptr<PgFencedStore> b = NewStore();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_lock(7)"), IsOk());
  absl::StatusOr<PgResult> b_result = absl::UnknownError("not run");
  absl::StatusOr<PgResult> a_result = absl::UnknownError("not run");
  // B (fence 2) locks the fence row, then stalls inside its statement.
  std::thread tb([&] { b_result = b->Write("order:1", 2, kStalledCharge, {"a", "100"}); });
  AwaitAdvisoryWaiter();
  // A (fence 1) starts while B's transaction is open: it waits on the row.
  std::thread ta([&] { a_result = a->Write("order:1", 1, kCharge, {"a", "1"}); });
  AwaitRowLockWaiter();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(7)"), IsOk());
  tb.join();
  ta.join();
  EXPECT_THAT(b_result, IsOk());
  EXPECT_TRUE(IsStaleFence(a_result.status())) << a_result.status();
  EXPECT_EQ(HighestSeenFence(a_result.status()), absl::optional<int64_t>(2));
  EXPECT_EQ(Balance("a"), "100");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(2));
}

TEST_F(PgFencedStoreTest, HigherFenceWaitingBehindALowerOneAppliesAfterIt) {
  std::unique_ptr<PgFencedStore> a = NewStore();
  std::unique_ptr<PgFencedStore> b = NewStore();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_lock(7)"), IsOk());
  absl::StatusOr<PgResult> a_result = absl::UnknownError("not run");
  absl::StatusOr<PgResult> b_result = absl::UnknownError("not run");
  std::thread ta([&] { a_result = a->Write("order:1", 1, kStalledCharge, {"a", "1"}); });
  AwaitAdvisoryWaiter();
  std::thread tb([&] { b_result = b->Write("order:1", 2, kCharge, {"a", "100"}); });
  AwaitRowLockWaiter();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(7)"), IsOk());
  ta.join();
  tb.join();
  EXPECT_THAT(a_result, IsOk());
  EXPECT_THAT(b_result, IsOk());
  EXPECT_EQ(Balance("a"), "101");
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(2));
}

// A holder writing again with the fence it already recorded (no UPDATE of
// the fence row needed) still holds the row: a newer holder's write waits
// for it and so commits after it, never before.
TEST_F(PgFencedStoreTest, WriteWithTheCurrentFenceHoldsBackAHigherFenceUntilItCommits) {
  constexpr char kStalledLog[] =
      "WITH gate AS (SELECT pg_advisory_xact_lock(7)) "
      "INSERT INTO fence_log (fence) SELECT $1::bigint FROM gate";
  ASSERT_THAT(store_->Write("order:1", 2, kCharge, {"a", "1"}), IsOk());
  std::unique_ptr<PgFencedStore> b = NewStore();
  std::unique_ptr<PgFencedStore> c = NewStore();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_lock(7)"), IsOk());
  absl::StatusOr<PgResult> b_result = absl::UnknownError("not run");
  absl::StatusOr<PgResult> c_result = absl::UnknownError("not run");
  std::thread tb([&] { b_result = b->Write("order:1", 2, kStalledLog, {"2"}); });
  AwaitAdvisoryWaiter();
  std::thread tc([&] {
    c_result = c->Write("order:1", 3, "INSERT INTO fence_log (fence) VALUES ($1)", {"3"});
  });
  AwaitRowLockWaiter();
  ASSERT_THAT(server_->Query("SELECT pg_advisory_unlock(7)"), IsOk());
  tb.join();
  tc.join();
  EXPECT_THAT(b_result, IsOk());
  EXPECT_THAT(c_result, IsOk());
  EXPECT_THAT(server_->Query("SELECT fence FROM fence_log ORDER BY seq"),
              IsOkAndHolds(std::vector<std::vector<std::string>>{{"2"}, {"3"}}));
}

// Many connections write random fences at once: the writes that applied, in
// the order they committed, never go down, and every refused fence was below
// the highest at the end.
TEST_F(PgFencedStoreTest, ConcurrentWritersNeverCommitAFenceBelowAnEarlierOne) {
  constexpr int kThreads = 4;
  constexpr int kWrites = 25;
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> refused(kThreads);
  std::vector<int> errors(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<PgFencedStore> s = NewStore();
      if (s == nullptr) return;
      absl::BitGen gen;
      for (int i = 0; i < kWrites; ++i) {
        const int64_t fence = absl::Uniform<int64_t>(gen, 1, 60);
        absl::StatusOr<PgResult> r = s->Write("order:1", fence,
                                              "INSERT INTO fence_log (fence) VALUES ($1)",
                                              {absl::StrCat(fence)});
        if (IsStaleFence(r.status())) {
          refused[t].push_back(fence);
        } else if (!r.ok()) {
          ++errors[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], 0);
  // The fence row lock serializes the writers, so seq order is commit order.
  absl::StatusOr<std::vector<std::vector<std::string>>> log =
      server_->Query("SELECT fence FROM fence_log ORDER BY seq");
  ASSERT_THAT(log, IsOk());
  int64_t previous = 0;
  size_t refused_total = 0;
  for (const auto& row : *log) {
    const int64_t f = std::stoll(row[0]);
    EXPECT_GE(f, previous);
    previous = f;
  }
  for (const auto& r : refused) {
    refused_total += r.size();
    for (int64_t f : r) EXPECT_LT(f, previous);
  }
  EXPECT_EQ(log->size() + refused_total, size_t{kThreads * kWrites});
  EXPECT_GT(refused_total, 0u);
  EXPECT_THAT(store_->HighestFence("order:1"), IsOkAndHolds(previous));
}

// --- faults: each on a server of its own -----------------------------------

TEST(PgFencedStoreFaultTest, RefusedConnectionIsUnavailable) {
  absl::StatusOr<int> port = test_support::PickFreeLoopbackPort();
  ASSERT_THAT(port, IsOk());
  PgStoreOptions o;
  o.conninfo = absl::StrCat("host=127.0.0.1 port=", *port, " user=postgres dbname=postgres");
  EXPECT_THAT(PgFencedStore::Connect(o), StatusIs(absl::StatusCode::kUnavailable));
  o.conninfo = "host=127.0.0.1 port=notaport";
  EXPECT_FALSE(PgFencedStore::Connect(o).ok());
  o.conninfo = "this is = not = a conninfo";
  EXPECT_THAT(PgFencedStore::Connect(o), StatusIs(absl::StatusCode::kInvalidArgument));
}

class PgFencedStoreCrashTest : public ::testing::TestWithParam<bool> {};

// The server dies (SIGKILL, param true) or shuts down fast (restart, param
// false) while a fenced transaction is open: the write reports kUnavailable
// and nothing of it is left, neither the statement nor the fence; after the
// restart the same store reconnects and writes.
TEST_P(PgFencedStoreCrashTest, ServerGoneInTheMiddleRollsBackEverything) {
  const bool kill = GetParam();
  absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
  ASSERT_THAT(pg, IsOk());
  PgServer& server = **pg;
  ASSERT_THAT(server.Query("CREATE TABLE accounts (id text PRIMARY KEY, balance bigint);"
                           "INSERT INTO accounts VALUES ('a', 0)"),
              IsOk());
  PgStoreOptions o;
  o.conninfo = server.conninfo();
  absl::StatusOr<std::unique_ptr<PgFencedStore>> store = PgFencedStore::Connect(o);
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->CreateFenceTable(), IsOk());
  ASSERT_THAT((*store)->Write("order:1", 1, kCharge, {"a", "1"}), IsOk());

  ASSERT_THAT(server.Query("SELECT pg_advisory_lock(7)"), IsOk());
  absl::StatusOr<PgResult> r = absl::UnknownError("not run");
  std::thread writer([&] { r = (*store)->Write("order:1", 2, kStalledCharge, {"a", "100"}); });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> waiting = server.QueryValue(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
    if (waiting.ok() && *waiting == "1") break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  // The writer's transaction is open: fence 2 recorded in it, the charge
  // waiting. Now the server goes.
  if (kill) {
    ASSERT_THAT(server.Kill(), IsOk());
  } else {
    ASSERT_THAT(server.process().Stop(), IsOk());
  }
  writer.join();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r.status().message(), HasSubstr("nothing applied"));
  ASSERT_THAT(server.Restart(), IsOk());
  EXPECT_THAT(server.QueryValue("SELECT balance FROM accounts WHERE id = 'a'"),
              IsOkAndHolds(std::string("1")));
  EXPECT_THAT(server.QueryValue("SELECT fence FROM dlock_fences WHERE resource = 'order:1'"),
              IsOkAndHolds(std::string("1")));
  // The same store reconnects.
  EXPECT_THAT((*store)->Write("order:1", 2, kCharge, {"a", "100"}), IsOk());
  EXPECT_THAT(server.QueryValue("SELECT balance FROM accounts WHERE id = 'a'"),
              IsOkAndHolds(std::string("101")));
}

INSTANTIATE_TEST_SUITE_P(KillOrRestart, PgFencedStoreCrashTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Killed" : "Restarted";
                         });

// A server that stops answering (SIGSTOP) mid-transaction: the client gives
// up at `timeout` with kDeadlineExceeded and drops the connection; when the
// server resumes it rolls the transaction back.
TEST(PgFencedStoreFaultTest, PausedServerTimesOutAndNothingIsApplied) {
  absl::StatusOr<std::unique_ptr<PgServer>> pg = PgServer::Start();
  ASSERT_THAT(pg, IsOk());
  PgServer& server = **pg;
  ASSERT_THAT(server.Query("CREATE TABLE accounts (id text PRIMARY KEY, balance bigint);"
                           "INSERT INTO accounts VALUES ('a', 0)"),
              IsOk());
  PgStoreOptions o;
  o.conninfo = server.conninfo();
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<PgFencedStore>> store = PgFencedStore::Connect(o);
  ASSERT_THAT(store, IsOk());
  ASSERT_THAT((*store)->CreateFenceTable(), IsOk());
  ASSERT_THAT(server.Pause(), IsOk());
  absl::StatusOr<PgResult> r = (*store)->Write("order:1", 1, kCharge, {"a", "5"});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_THAT(server.Resume(), IsOk());
  EXPECT_THAT(server.QueryValue("SELECT balance FROM accounts WHERE id = 'a'"),
              IsOkAndHolds(std::string("0")));
  EXPECT_THAT((*store)->Write("order:1", 1, kCharge, {"a", "5"}), IsOk());
  EXPECT_THAT(server.QueryValue("SELECT balance FROM accounts WHERE id = 'a'"),
              IsOkAndHolds(std::string("5")));
}

}  // namespace
}  // namespace fenced
}  // namespace dlock
