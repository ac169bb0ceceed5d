// SentinelTransport with real processes: a master demoted behind the
// sentinels' back (no +switch-master is ever published) answers the next
// write with READONLY; that reply alone makes the transport ask the
// sentinels again, and the next command goes to the real master. A replica
// never grants a lock.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/sentinel_deployment.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/uv/sentinel_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"
#include "dlock/transport/uv/uv_test_loop.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::RedisServer;
using ::dlock::test_support::SentinelDeployment;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Address(RedisServer& s) { return absl::StrCat("127.0.0.1:", s.port()); }

class SentinelReadonlyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    lock_.reset();
    if (client_ != nullptr) client_->Close();
    client_.reset();
    events_.reset();
    EXPECT_EQ(loop_.Close(), 0);
  }

  absl::StatusOr<Lease> AcquireNow(const std::string& resource) {
    std::optional<absl::StatusOr<Lease>> out;
    AcquireOptions o;
    o.ttl = absl::Seconds(60);
    absl::StatusOr<AcquireHandle> h =
        lock_->Acquire(resource, o, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!h.ok()) return h.status();
    loop_.RunUntil([&] { return out.has_value(); }, absl::Seconds(10));
    return out.value_or(absl::DeadlineExceededError("no answer"));
  }

  // Runs `argv` on every sentinel; fails the test on an error.
  void OnEverySentinel(const std::vector<std::string>& argv) {
    for (int i = 0; i < deployment_->sentinel_count(); ++i) {
      absl::StatusOr<Reply> r = deployment_->sentinel(i).Command(argv);
      ASSERT_THAT(r, IsOk());
      ASSERT_FALSE(r->is_error()) << argv[1] << ": " << r->str;
    }
  }

  std::unique_ptr<SentinelDeployment> deployment_;
  dlock::test_support::UvTestLoop loop_;
  std::unique_ptr<UvEventLoop> events_ = std::make_unique<UvEventLoop>(loop_.get());
  std::unique_ptr<SentinelTransport> client_;
  std::unique_ptr<SimpleLock> lock_;
  KeyScheme keys_;
};

TEST_F(SentinelReadonlyTest, ReadonlyReplyRediscoversTheRealMaster) {
  absl::StatusOr<std::unique_ptr<SentinelDeployment>> d = SentinelDeployment::Start();
  ASSERT_THAT(d, IsOk());
  deployment_ = *std::move(d);
  RedisServer& old_master = deployment_->data(0);
  RedisServer& new_master = deployment_->data(1);
  RedisServer& other = deployment_->data(2);

  SentinelTransportOptions o;
  o.master_name = deployment_->master_name();
  for (int i = 0; i < deployment_->sentinel_count(); ++i) {
    o.sentinels.push_back({"127.0.0.1", deployment_->sentinel(i).port()});
  }
  absl::StatusOr<std::unique_ptr<SentinelTransport>> t =
      SentinelTransport::Create(loop_.get(), std::move(o));
  ASSERT_THAT(t, IsOk());
  client_ = *std::move(t);
  std::optional<absl::Status> up;
  ASSERT_THAT(client_->Connect([&](absl::Status s) { up = s; }), IsOk());
  ASSERT_TRUE(loop_.RunUntil([&] { return up.has_value(); }, absl::Seconds(10)));
  ASSERT_THAT(*up, IsOk());
  ASSERT_EQ(client_->master_address(), Address(old_master));
  lock_ = std::make_unique<SimpleLock>(events_.get(), client_.get());
  absl::StatusOr<Lease> before = AcquireNow("before");
  ASSERT_THAT(before, IsOk());
  const uint64_t changes = client_->master_changes();

  // Behind the sentinels' back: data node 1 becomes the master, the old
  // master and data node 2 its replicas. Then the sentinels are told
  // (REMOVE + MONITOR: no failover, so no +switch-master message).
  const std::string port = absl::StrCat(new_master.port());
  ASSERT_THAT(new_master.Command({"REPLICAOF", "NO", "ONE"}), IsOk());
  ASSERT_THAT(old_master.Command({"REPLICAOF", "127.0.0.1", port}), IsOk());
  ASSERT_THAT(other.Command({"REPLICAOF", "127.0.0.1", port}), IsOk());
  OnEverySentinel({"SENTINEL", "REMOVE", deployment_->master_name()});
  OnEverySentinel({"SENTINEL", "MONITOR", deployment_->master_name(), "127.0.0.1", port, "2"});
  ASSERT_THAT(deployment_->MasterIndex(), ::dlock::test_support::IsOkAndHolds(1));
  // Nothing has told the client yet.
  EXPECT_EQ(client_->master_address(), Address(old_master));

  // The next acquire reaches the demoted master: refused with READONLY, no
  // lease, no key anywhere.
  absl::StatusOr<Lease> refused = AcquireNow("after");
  ASSERT_THAT(refused, Not(IsOk()));
  EXPECT_THAT(refused.status().message(), HasSubstr("READONLY")) << refused.status();
  absl::StatusOr<Reply> key = new_master.Command({"EXISTS", keys_.LockKey("after")});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(*key, Reply::Integer(0));

  // That reply was the hint: the transport asks the sentinels and moves to
  // the real master.
  ASSERT_TRUE(loop_.RunUntil(
      [&] { return client_->master_address() == Address(new_master) && client_->connected(); },
      absl::Seconds(10)))
      << client_->master_address() << " " << client_->last_error();
  // One change (the round found the new master at once) or two (a round
  // first met the old master, now a replica, and dropped it -- "demoted" in
  // sentinel_discovery.h -- then the next round found the new one); which
  // depends on the order the sentinels answer in. Never more: no flapping.
  EXPECT_GE(client_->master_changes(), changes + 1);
  EXPECT_LE(client_->master_changes(), changes + 2);

  // The next command goes there: the lock is granted by the real master.
  absl::StatusOr<Lease> granted = AcquireNow("after");
  ASSERT_THAT(granted, IsOk());
  key = new_master.Command({"GET", keys_.LockKey("after")});
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(*key, Reply::String(granted->token));
  absl::StatusOr<Reply> role = new_master.Command({"ROLE"});
  ASSERT_THAT(role, IsOk());
  ASSERT_TRUE(role->is_array() && !role->elements.empty());
  EXPECT_EQ(role->elements[0].str, "master");
}

}  // namespace
}  // namespace dlock
