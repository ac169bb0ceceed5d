// This header defines the behaviour suite of the Redis fenced store
// (redis_store.h): typed tests that run unchanged on the in-memory fake
// (fenced/redis_store_fake_test.cc, virtual time) and on a real
// redis-server (fenced/redis_store_real_test.cc). An environment provides
// connections, the loop, synchronous server access and the faults:
//
//   class MyEnv : public dlock::fenced::testing::FencedStoreTestEnv { ... };
//   INSTANTIATE_TYPED_TEST_SUITE_P(My, RedisFencedStoreTest, ::testing::Types<MyEnv>);
#ifndef DLOCK_FENCED_REDIS_STORE_SUITE_H_
#define DLOCK_FENCED_REDIS_STORE_SUITE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/reply.h"
#include "dlock/transport/transport.h"

namespace dlock {
namespace fenced {
namespace test_support {

class FencedStoreTestEnv {
 public:
  virtual ~FencedStoreTestEnv() = default;
  // A new connection to the store (owned by the env), ready to use.
  virtual Transport* NewClient() = 0;
  // Runs the loop until `done()` or `limit` of loop time passed; returns
  // done().
  virtual bool RunUntil(const std::function<bool()>& done, absl::Duration limit) = 0;
  // Synchronous server access for setup and inspection (not under test).
  virtual Reply Server(std::vector<std::string> argv) = 0;
  // The store goes down for `client`: a command sent now fails without
  // being applied. Up() brings it back, data intact, and waits until
  // `client` is connected again.
  virtual void Down(Transport* client) = 0;
  virtual void Up(Transport* client) = 0;
  // The next command of `client` gets no reply within its timeout (it is
  // applied once, now or after Unstall()).
  virtual void Stall(Transport* client) = 0;
  virtual void Unstall(Transport* client) = 0;
};

template <typename Env>
class RedisFencedStoreTest : public ::testing::Test {
 protected:
  RedisFencedStoreTest() : env_(std::make_unique<Env>()) {
    client_ = env_->NewClient();
    store_ = std::make_unique<RedisFencedStore>(client_);
  }

  absl::StatusOr<RedisWriteResult> WriteNow(RedisFencedStore& store,
                                            absl::string_view resource, int64_t fence,
                                            RedisWrite write) {
    bool done = false;
    absl::StatusOr<RedisWriteResult> out = absl::UnknownError("not run");
    absl::Status sent = store.Write(resource, fence, std::move(write),
                                    [&](absl::StatusOr<RedisWriteResult> r) {
                                      EXPECT_FALSE(done) << "callback ran twice";
                                      out = std::move(r);
                                      done = true;
                                    });
    if (!sent.ok()) {
      EXPECT_FALSE(done) << "a rejected call ran its callback";
      return sent;
    }
    EXPECT_FALSE(done) << "callback ran inside Write";
    EXPECT_TRUE(env_->RunUntil([&] { return done; }, absl::Seconds(30)));
    return out;
  }
  absl::StatusOr<RedisWriteResult> WriteNow(absl::string_view resource, int64_t fence,
                                            RedisWrite write) {
    return WriteNow(*store_, resource, fence, std::move(write));
  }

  absl::StatusOr<int64_t> HighestNow(absl::string_view resource) {
    bool done = false;
    absl::StatusOr<int64_t> out = absl::UnknownError("not run");
    absl::Status sent = store_->HighestFence(resource, [&](absl::StatusOr<int64_t> r) {
      out = std::move(r);
      done = true;
    });
    if (!sent.ok()) return sent;
    EXPECT_FALSE(done) << "callback ran inside HighestFence";
    EXPECT_TRUE(env_->RunUntil([&] { return done; }, absl::Seconds(30)));
    return out;
  }

  std::string Key(absl::string_view resource, absl::string_view name) {
    return store_->DataKey(resource, name);
  }
  Reply Get(const std::string& key) { return env_->Server({"GET", key}); }

  std::unique_ptr<Env> env_;
  Transport* client_ = nullptr;
  std::unique_ptr<RedisFencedStore> store_;
};

TYPED_TEST_SUITE_P(RedisFencedStoreTest);

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using ::testing::ElementsAre;

TYPED_TEST_P(RedisFencedStoreTest, CurrentFenceAppliesAndIsRecorded) {
  const std::string key = this->Key("order/7", "status:");
  auto r = this->WriteNow("order/7", 5, RedisWrite().Set(key, "paid"));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->fence, 5);
  EXPECT_THAT(r->values, ElementsAre(1));
  EXPECT_EQ(this->Get(key), Reply::String("paid"));
  EXPECT_EQ(this->Get(this->store_->FenceKey("order/7")), Reply::String("5"));
  EXPECT_THAT(this->HighestNow("order/7"), ::dlock::test_support::IsOkAndHolds(5));
}

TYPED_TEST_P(RedisFencedStoreTest, LowerFenceIsStaleWithTheHighestSeenAndWritesNothing) {
  const std::string key = this->Key("order/7", "status:");
  ASSERT_THAT(this->WriteNow("order/7", 7, RedisWrite().Set(key, "new")), IsOk());
  auto stale = this->WriteNow("order/7", 6, RedisWrite().Set(key, "old"));
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsStaleFence(stale.status()));
  EXPECT_EQ(HighestSeenFence(stale.status()), 7);
  EXPECT_EQ(this->Get(key), Reply::String("new"));
  EXPECT_THAT(this->HighestNow("order/7"), ::dlock::test_support::IsOkAndHolds(7));
}

TYPED_TEST_P(RedisFencedStoreTest, EqualFenceIsCurrentSoAHolderWritesMoreThanOnce) {
  const std::string key = this->Key("r", "n:");
  ASSERT_THAT(this->WriteNow("r", 3, RedisWrite().IncrBy(key, 1)), IsOk());
  auto again = this->WriteNow("r", 3, RedisWrite().IncrBy(key, 1));
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(again->values, ElementsAre(2));
}

TYPED_TEST_P(RedisFencedStoreTest, AHigherFenceRaisesTheRecordAndMakesOlderOnesStale) {
  const std::string key = this->Key("r", "v:");
  ASSERT_THAT(this->WriteNow("r", 3, RedisWrite().Set(key, "a")), IsOk());
  ASSERT_THAT(this->WriteNow("r", 9, RedisWrite().Set(key, "b")), IsOk());
  EXPECT_THAT(this->HighestNow("r"), ::dlock::test_support::IsOkAndHolds(9));
  auto stale = this->WriteNow("r", 5, RedisWrite().Set(key, "c"));
  EXPECT_EQ(HighestSeenFence(stale.status()), 9);
  EXPECT_EQ(this->Get(key), Reply::String("b"));
}

TYPED_TEST_P(RedisFencedStoreTest, FencesArePerResource) {
  // B's high fence neither lets A's stale fence pass nor makes A's current
  // one stale.
  ASSERT_THAT(this->WriteNow("B", 100, RedisWrite().Set(this->Key("B", "v:"), "b")), IsOk());
  ASSERT_THAT(this->WriteNow("A", 2, RedisWrite().Set(this->Key("A", "v:"), "a2")), IsOk());
  auto stale = this->WriteNow("A", 1, RedisWrite().Set(this->Key("A", "v:"), "a1"));
  EXPECT_TRUE(IsStaleFence(stale.status()));
  EXPECT_EQ(HighestSeenFence(stale.status()), 2);
  EXPECT_EQ(this->Get(this->Key("A", "v:")), Reply::String("a2"));
  EXPECT_THAT(this->HighestNow("B"), ::dlock::test_support::IsOkAndHolds(100));
  EXPECT_THAT(this->HighestNow("never-written"), ::dlock::test_support::IsOkAndHolds(0));
}

TYPED_TEST_P(RedisFencedStoreTest, ABatchAppliesEveryVerbInOrder) {
  const std::string order = this->Key("sku", "order:");
  const std::string stock = this->Key("sku", "stock:");
  const std::string note = this->Key("sku", "note:");
  const std::string gone = this->Key("sku", "gone:");
  this->env_->Server({"SET", stock, "10"});
  this->env_->Server({"SET", gone, "x"});
  auto r = this->WriteNow("sku", 4,
                          RedisWrite()
                              .HashSet(order, {{"state", "paid"}, {"qty", "3"}})
                              .IncrBy(stock, -3, 0)
                              .Set(note, "n", absl::Seconds(60))
                              .Delete(gone));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->values, ElementsAre(2, 7, 1, 1));
  EXPECT_EQ(this->env_->Server({"HGET", order, "state"}), Reply::String("paid"));
  EXPECT_EQ(this->Get(stock), Reply::String("7"));
  Reply pttl = this->env_->Server({"PTTL", note});
  EXPECT_TRUE(pttl.is_integer() && pttl.integer > 0 && pttl.integer <= 60000) << pttl;
  EXPECT_EQ(this->Get(gone), Reply::Nil());
  auto again =
      this->WriteNow("sku", 4, RedisWrite().Delete(gone).IncrBy(this->Key("sku", "new:"), 5));
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(again->values, ElementsAre(0, 5));
}

TYPED_TEST_P(RedisFencedStoreTest, ADecrementBelowTheFloorIsRefusedAndNothingApplies) {
  const std::string stock = this->Key("sku", "stock:");
  const std::string order = this->Key("sku", "order:");
  this->env_->Server({"SET", stock, "1"});
  ASSERT_THAT(this->WriteNow("sku", 1, RedisWrite().IncrBy(stock, -1, 0)), IsOk());
  EXPECT_EQ(this->Get(stock), Reply::String("0"));
  auto r = this->WriteNow("sku", 2, RedisWrite().Set(order, "paid").IncrBy(stock, -1, 0));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_TRUE(IsBelowFloor(r.status()));
  EXPECT_FALSE(IsStaleFence(r.status()));
  // Nothing applied, not even the fence.
  EXPECT_EQ(this->Get(stock), Reply::String("0"));
  EXPECT_EQ(this->Get(order), Reply::Nil());
  EXPECT_THAT(this->HighestNow("sku"), ::dlock::test_support::IsOkAndHolds(1));
  // A missing key counts as 0.
  EXPECT_TRUE(IsBelowFloor(
      this->WriteNow("sku", 2, RedisWrite().IncrBy(this->Key("sku", "none:"), -1, 0))
          .status()));
  // Beyond 2^53 - 1: out of range, but not below a floor.
  this->env_->Server({"SET", stock, "9007199254740990"});
  auto big = this->WriteNow("sku", 2, RedisWrite().IncrBy(stock, 2));
  EXPECT_THAT(big, StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_FALSE(IsBelowFloor(big.status()));
}

TYPED_TEST_P(RedisFencedStoreTest, ForeignDataIsInternalAndNothingApplies) {
  const std::string hash = this->Key("r", "h:");
  const std::string text = this->Key("r", "t:");
  const std::string other = this->Key("r", "o:");
  this->env_->Server({"HSET", hash, "f", "v"});
  this->env_->Server({"SET", text, "abc"});
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x").Set(hash, "s")),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x").IncrBy(hash, 1)),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x").IncrBy(text, 1)),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x").HashSet(text, {{"f", "v"}})),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(this->Get(other), Reply::Nil());
  EXPECT_EQ(this->Get(text), Reply::String("abc"));
  EXPECT_EQ(this->Get(this->store_->FenceKey("r")), Reply::Nil());
  // A fence record that is not a fence.
  this->env_->Server({"SET", this->store_->FenceKey("r"), "not-a-number"});
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x")),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->HighestNow("r"), StatusIs(absl::StatusCode::kInternal));
  this->env_->Server({"DEL", this->store_->FenceKey("r")});
  this->env_->Server({"HSET", this->store_->FenceKey("r"), "f", "1"});
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(other, "x")),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(this->HighestNow("r"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(this->Get(other), Reply::Nil());
}

TYPED_TEST_P(RedisFencedStoreTest, BadArgumentsAreRejectedByTheCall) {
  const std::string k = this->Key("r", "k:");
  for (int64_t fence : {int64_t{0}, int64_t{-1}, kMaxFencedInteger + 1}) {
    EXPECT_THAT(this->WriteNow("r", fence, RedisWrite().Set(k, "v")),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << fence;
  }
  EXPECT_THAT(this->WriteNow("", 1, RedisWrite().Set(k, "v")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set("", "v")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(k, "v").IncrBy(k, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(this->store_->FenceKey("r"), "9")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Another resource's slot (and a key with no tag at all).
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(this->Key("other", "k:"), "v")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set("stock", "v")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().HashSet(k, {})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().Set(k, "v", -absl::Seconds(1))),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->WriteNow("r", 1, RedisWrite().IncrBy(k, kMaxFencedInteger + 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(this->HighestNow(""), StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing reached the server.
  EXPECT_EQ(this->Get(k), Reply::Nil());
  EXPECT_EQ(this->Get(this->store_->FenceKey("r")), Reply::Nil());
  // Bad options: every call says why.
  RedisFencedStoreOptions braces;
  braces.prefix = "app{x}:";
  RedisFencedStore bad(this->client_, braces);
  EXPECT_THAT(this->WriteNow(bad, "r", 1, RedisWrite().Set(k, "v")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RedisFencedStore::ValidateOptions(nullptr, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TYPED_TEST_P(RedisFencedStoreTest, CrossSlotKeysPassOnASingleServerWhenAllowed) {
  RedisFencedStoreOptions o;
  o.allow_cross_slot = true;
  RedisFencedStore store(this->client_, o);
  ASSERT_THAT(this->WriteNow(store, "r", 1, RedisWrite().Set("plain-key", "v")), IsOk());
  EXPECT_EQ(this->Get("plain-key"), Reply::String("v"));
}

TYPED_TEST_P(RedisFencedStoreTest, ResourcesWhoseTagWouldBeEmptyGetOneSlotToo) {
  for (const std::string r : {"}x", "}y"}) {
    const std::string key = this->Key(r, "v:");
    EXPECT_NE(this->store_->FenceKey(r).find("#{"), std::string::npos);
    ASSERT_THAT(this->WriteNow(r, 2, RedisWrite().Set(key, r)), IsOk()) << r;
    EXPECT_TRUE(IsStaleFence(this->WriteNow(r, 1, RedisWrite().Set(key, "old")).status()));
  }
  EXPECT_EQ(this->Get(this->Key("}x", "v:")), Reply::String("}x"));
  EXPECT_EQ(this->Get(this->Key("}y", "v:")), Reply::String("}y"));
}

TYPED_TEST_P(RedisFencedStoreTest, AnEmptyWriteChecksAndRecordsTheFence) {
  ASSERT_THAT(this->WriteNow("job", 12, RedisWrite()), IsOk());
  EXPECT_THAT(this->HighestNow("job"), ::dlock::test_support::IsOkAndHolds(12));
  EXPECT_EQ(HighestSeenFence(this->WriteNow("job", 11, RedisWrite()).status()), 12);
}

TYPED_TEST_P(RedisFencedStoreTest, AStoreThatIsDownIsUnavailableAndAppliesNothing) {
  const std::string stock = this->Key("sku", "stock:");
  ASSERT_THAT(this->WriteNow("sku", 1, RedisWrite().IncrBy(stock, 5)), IsOk());
  this->env_->Down(this->client_);
  EXPECT_THAT(this->WriteNow("sku", 2, RedisWrite().IncrBy(stock, -1, 0)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(this->HighestNow("sku"), StatusIs(absl::StatusCode::kUnavailable));
  this->env_->Up(this->client_);
  EXPECT_EQ(this->Get(stock), Reply::String("5"));
  EXPECT_THAT(this->HighestNow("sku"), ::dlock::test_support::IsOkAndHolds(1));
  ASSERT_THAT(this->WriteNow("sku", 2, RedisWrite().IncrBy(stock, -1, 0)), IsOk());
  EXPECT_EQ(this->Get(stock), Reply::String("4"));
}

TYPED_TEST_P(RedisFencedStoreTest, ATimedOutWriteIsDeadlineExceededAndAppliedAtMostOnce) {
  const std::string stock = this->Key("sku", "stock:");
  ASSERT_THAT(this->WriteNow("sku", 1, RedisWrite().IncrBy(stock, 10)), IsOk());
  RedisFencedStoreOptions o;
  o.timeout = absl::Milliseconds(200);
  RedisFencedStore store(this->client_, o);
  this->env_->Stall(this->client_);
  EXPECT_THAT(this->WriteNow(store, "sku", 1, RedisWrite().IncrBy(stock, -1, 0)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  this->env_->Unstall(this->client_);
  // The next write on the same connection comes after it: the timed-out
  // decrement applied exactly once (never resent).
  auto next = this->WriteNow("sku", 1, RedisWrite().IncrBy(stock, -1, 0));
  ASSERT_THAT(next, IsOk());
  EXPECT_THAT(next->values, ElementsAre(8));
}

REGISTER_TYPED_TEST_SUITE_P(RedisFencedStoreTest, CurrentFenceAppliesAndIsRecorded,
                            LowerFenceIsStaleWithTheHighestSeenAndWritesNothing,
                            EqualFenceIsCurrentSoAHolderWritesMoreThanOnce,
                            AHigherFenceRaisesTheRecordAndMakesOlderOnesStale,
                            FencesArePerResource, ABatchAppliesEveryVerbInOrder,
                            ADecrementBelowTheFloorIsRefusedAndNothingApplies,
                            ForeignDataIsInternalAndNothingApplies,
                            BadArgumentsAreRejectedByTheCall,
                            CrossSlotKeysPassOnASingleServerWhenAllowed,
                            ResourcesWhoseTagWouldBeEmptyGetOneSlotToo,
                            AnEmptyWriteChecksAndRecordsTheFence,
                            AStoreThatIsDownIsUnavailableAndAppliesNothing,
                            ATimedOutWriteIsDeadlineExceededAndAppliedAtMostOnce);

}  // namespace test_support
}  // namespace fenced
}  // namespace dlock

#endif  // DLOCK_FENCED_REDIS_STORE_SUITE_H_
