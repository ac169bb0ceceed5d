// ReadWriteLock and MultiLock on a real redis-server (hiredis transports on
// a libuv loop): readers overlap, a writer excludes them, a waiting writer
// keeps new readers out and is woken by the last reader's release (real
// pub/sub), a crashed reader's lease expires on the server's clock, fences
// increase across writers; a multi-lock whose 2nd resource is busy holds
// nothing when its callback runs.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/multi_lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/read_write_scripts.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/redis_server.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_clients.h"
#include "dlock/tests/env/uv_server_test.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;

AcquireOptions Opts(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

class ReadWriteMultiRealTest : public test_support::UvServerTest {
 protected:
  void TearDown() override {
    locks_.clear();
    UvServerTest::TearDown();
  }

  Transport* Client() { return uv_.Hiredis(server_->port()); }

  // A ReadWriteLock on a connection of its own (another "process").
  ReadWriteLock& NewRw() {
    locks_.push_back(std::make_unique<ReadWriteLock>(uv_.loop(), Client()));
    return *locks_.back();
  }

  absl::StatusOr<Lease> Take(Lock& lock, absl::string_view resource, AcquireOptions o) {
    return uv_.Acquire(lock, resource, o, o.wait + absl::Seconds(10));
  }
  absl::StatusOr<Lease> Take(Lock& lock, absl::string_view resource) {
    return Take(lock, resource, Opts(absl::Seconds(30)));
  }

  absl::Status Release(Lock& lock, const Lease& lease) { return uv_.Release(lock, lease); }

  bool Exists(const std::string& key) {
    absl::StatusOr<Reply> r = server_->Command({"EXISTS", key});
    return r.ok() && *r == Reply::Integer(1);
  }

  std::vector<std::unique_ptr<ReadWriteLock>> locks_;
  KeyScheme keys_;
};

TEST_F(ReadWriteMultiRealTest, ReadersOverlapAndAWriterExcludesThem) {
  ReadWriteLock& a = NewRw();
  ReadWriteLock& b = NewRw();
  absl::StatusOr<Lease> r1 = Take(a.reader(), "cfg");
  absl::StatusOr<Lease> r2 = Take(b.reader(), "cfg");
  ASSERT_THAT(r1, IsOk());
  ASSERT_THAT(r2, IsOk());
  EXPECT_THAT(Take(b.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  // The writer now waits: no new reader.
  EXPECT_THAT(Take(a.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(Release(a.reader(), *r1), IsOk());
  ASSERT_THAT(Release(b.reader(), *r2), IsOk());
  absl::StatusOr<Lease> w = Take(b.writer(), "cfg");
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Take(a.reader(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Take(a.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(Release(b.writer(), *w), IsOk());
  absl::StatusOr<Lease> w2 = Take(a.writer(), "cfg");
  ASSERT_THAT(w2, IsOk());
  EXPECT_GT(w2->fence, w->fence);
}

// The writer's transaction (lock/write_acquire_tx.h) on a real server:
// `calls=` of one command in INFO commandstats since the last RESETSTAT.
int64_t Calls(const std::string& commandstats, const std::string& command) {
  const std::string field = "cmdstat_" + command + ":calls=";
  const size_t at = commandstats.find(field);
  if (at == std::string::npos) return 0;
  return std::strtoll(commandstats.c_str() + at + field.size(), nullptr, 10);
}

// A live reader: the transaction's SET takes the key, its EXISTS sees the
// readers (MULTI/EXEC: no reader can come or go between them); the rare
// path refuses the writer and deletes the key again; the fence never went
// to the refused writer, and the next writer's is above every earlier one.
// A free resource costs one transaction and no script.
TEST_F(ReadWriteMultiRealTest, TheWritersTransactionIsRefusedByALiveReaderAndLeavesNoKey) {
  ReadWriteLock& a = NewRw();
  ReadWriteLock& b = NewRw();
  absl::StatusOr<Lease> w0 = Take(a.writer(), "cfg");
  ASSERT_THAT(w0, IsOk());
  ASSERT_THAT(Release(a.writer(), *w0), IsOk());
  absl::StatusOr<Lease> r = Take(a.reader(), "cfg");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->fence, w0->fence);
  ASSERT_THAT(server_->Command({"CONFIG", "RESETSTAT"}), IsOk());
  EXPECT_THAT(Take(b.writer(), "cfg"), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<Reply> stats = server_->Command({"INFO", "commandstats"});
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(Calls(stats->str, "exec"), 1);
  EXPECT_EQ(Calls(stats->str, "evalsha") + Calls(stats->str, "eval"), 1);  // the rare path
  EXPECT_FALSE(Exists(keys_.LockKey("cfg")));
  EXPECT_TRUE(Exists(WriterIntentKey(keys_, "cfg")));
  ASSERT_THAT(Release(a.reader(), *r), IsOk());
  absl::StatusOr<Lease> w1 = Take(b.writer(), "cfg");  // clears the intent (rare path)
  ASSERT_THAT(w1, IsOk());
  EXPECT_GT(w1->fence, w0->fence);
  EXPECT_FALSE(Exists(WriterIntentKey(keys_, "cfg")));
  ASSERT_THAT(Release(b.writer(), *w1), IsOk());
  absl::StatusOr<Lease> reader_after = Take(a.reader(), "cfg");
  ASSERT_THAT(reader_after, IsOk());
  EXPECT_GE(reader_after->fence, w1->fence);
  ASSERT_THAT(Release(a.reader(), *reader_after), IsOk());
  ASSERT_THAT(server_->Command({"CONFIG", "RESETSTAT"}), IsOk());
  absl::StatusOr<Lease> w2 = Take(b.writer(), "cfg");
  ASSERT_THAT(w2, IsOk());
  EXPECT_GT(w2->fence, reader_after->fence);
  stats = server_->Command({"INFO", "commandstats"});
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(Calls(stats->str, "exec"), 1);
  EXPECT_EQ(Calls(stats->str, "evalsha") + Calls(stats->str, "eval"), 0);
  EXPECT_EQ(Calls(stats->str, "exists"), 1);
}

TEST_F(ReadWriteMultiRealTest, AWaitingWriterIsWokenByTheLastReadersRelease) {
  ReadWriteLock& a = NewRw();
  ReadWriteLock& b = NewRw();
  RetryLockOptions ro;
  ro.initial_backoff = absl::Seconds(20);  // only the notification wakes it in time
  ro.max_backoff = absl::Seconds(20);
  ro.jitter = [](absl::Duration cap) { return cap; };
  RetryLock writers(uv_.loop(), &b.writer(), ro);
  absl::StatusOr<Lease> r = Take(a.reader(), "cfg");
  ASSERT_THAT(r, IsOk());
  bool done = false;
  absl::StatusOr<Lease> w = absl::UnknownError("pending");
  ASSERT_THAT(writers.Acquire("cfg", Opts(absl::Seconds(30), absl::Seconds(15)),
                              [&](absl::StatusOr<Lease> l) {
                                w = std::move(l);
                                done = true;
                              }),
              IsOk());
  // Until its subscription is live and its intent marker set.
  ASSERT_TRUE(uv_.RunUntil([&] {
    return writers.subscriptions() == 1 && Exists(WriterIntentKey(keys_, "cfg"));
  }));
  ASSERT_THAT(Release(a.reader(), *r), IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return done; }, absl::Seconds(10)));
  EXPECT_THAT(w, IsOk());
}

TEST_F(ReadWriteMultiRealTest, ACrashedReaderStopsCountingAtItsOwnExpiry) {
  ReadWriteLock& a = NewRw();
  ReadWriteLock& b = NewRw();
  absl::StatusOr<Lease> crashed = Take(a.reader(), "cfg", Opts(absl::Milliseconds(300)));
  ASSERT_THAT(crashed, IsOk());
  // The writer waits (polling with backoff) until the reader's entry is
  // past its expiry on the server's clock.
  RetryLock writers(uv_.loop(), &b.writer());
  absl::StatusOr<Lease> w = Take(writers, "cfg", Opts(absl::Seconds(30), absl::Seconds(10)));
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(Release(a.reader(), *crashed), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(ReadWriteMultiRealTest, AMultiLockWithABusySecondResourceHoldsNothingAtItsCallback) {
  SimpleLock mine(uv_.loop(), Client());
  SimpleLock other(uv_.loop(), Client());
  ASSERT_THAT(Take(other, "b"), IsOk());
  MultiLock multi(uv_.loop(), &mine);
  bool done = false;
  bool a_held_at_callback = true;
  absl::StatusOr<std::vector<Lease>> out = absl::UnknownError("pending");
  ASSERT_THAT(multi.Acquire({"b", "a"}, Opts(absl::Seconds(30)),
                            [&](absl::StatusOr<std::vector<Lease>> r) {
                              a_held_at_callback = Exists(keys_.LockKey("a"));
                              out = std::move(r);
                              done = true;
                            }),
              IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return done; }));
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kAborted));
  EXPECT_FALSE(a_held_at_callback);
  // And when both are free it takes both.
  done = false;
  ASSERT_THAT(multi.Acquire({"c", "a"}, Opts(absl::Seconds(30)),
                            [&](absl::StatusOr<std::vector<Lease>> r) {
                              out = std::move(r);
                              done = true;
                            }),
              IsOk());
  ASSERT_TRUE(uv_.RunUntil([&] { return done; }));
  ASSERT_THAT(out, IsOk());
  EXPECT_TRUE(Exists(keys_.LockKey("a")) && Exists(keys_.LockKey("c")));
}

}  // namespace
}  // namespace dlock
