// RetryLock's cross-client hand-off queue (docs/handoff.md) end to end on a
// real redis-server: separate clients -- each its own connection, SimpleLock
// and RetryLock, all with default options, as separate processes would be --
// contend for one resource, each taking the lock again right after its
// release (the worst case for barging). Asserts behaviour, not timings: every
// critical section is exclusive (and fences only grow), every client gets
// sections, the lock moves by hand-offs (about one attempt per section, the
// queue scripts in use), and once the clients stop nothing of the queue is
// left without a TTL. The scripts alone, step by step:
// handoff_scripts_real_test; the clients in virtual time: //lock:handoff_test.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "dlock/lock/handoff_scripts.h"
#include "dlock/lock/keys.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/tests/env/uv_server_test.h"
#include "dlock/transport/uv/hiredis_transport.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;

// What the contending clients share: the checks of every critical section.
struct Ledger {
  int inside = 0;       // clients in their critical section now
  int overlaps = 0;     // grants made while another held the lock
  int sections = 0;     // critical sections completed
  int64_t last_fence = 0;
  int fence_regressions = 0;
  int errors = 0;       // acquires or releases that failed
  std::string first_error;
};

// One separate client: its own connection, SimpleLock and RetryLock, and a
// loop of acquire -> hold -> release -> acquire again until `stop`.
class Contender {
 public:
  Contender(EventLoop* loop, Transport* conn, Ledger* ledger, const int* target)
      : loop_(loop), simple_(loop, conn), retry_(loop, &simple_), ledger_(ledger),
        target_(target) {}

  void Start() { Acquire(); }
  // Stopped, and its last release answered.
  bool idle() const { return idle_ && releases_ == 0; }
  int sections() const { return sections_; }
  const RetryLock& retry() const { return retry_; }

 private:
  void Acquire() {
    if (ledger_->sections >= *target_) {
      idle_ = true;
      return;
    }
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    o.wait = absl::Seconds(30);
    absl::StatusOr<AcquireHandle> h =
        retry_.Acquire("r", o, [this](absl::StatusOr<Lease> r) { OnAcquired(std::move(r)); });
    if (!h.ok()) Fail(h.status());
  }

  void OnAcquired(absl::StatusOr<Lease> r) {
    if (!r.ok()) return Fail(r.status());
    if (ledger_->inside > 0) ++ledger_->overlaps;
    ++ledger_->inside;
    if (r->fence <= ledger_->last_fence) ++ledger_->fence_regressions;
    ledger_->last_fence = r->fence;
    Lease lease = *std::move(r);
    // The critical section spans loop turns: other clients' replies and
    // hand-off messages are handled while it is held.
    loop_->RunAfter(absl::Milliseconds(1), [this, lease] {
      --ledger_->inside;
      ++ledger_->sections;
      ++sections_;
      ++releases_;
      absl::Status s = retry_.Release(lease, [this](absl::Status s) {
        --releases_;
        if (!s.ok()) Fail(s);
      });
      if (!s.ok()) {
        --releases_;
        return Fail(s);
      }
      Acquire();  // at once, in the same turn as the release
    });
  }

  void Fail(const absl::Status& s) {
    if (ledger_->errors++ == 0) ledger_->first_error = s.ToString();
    idle_ = true;
  }

  EventLoop* const loop_;
  SimpleLock simple_;
  RetryLock retry_;
  Ledger* const ledger_;
  const int* const target_;
  int sections_ = 0;
  int releases_ = 0;  // in flight
  bool idle_ = false;
};

class HandOffRealTest : public test_support::UvServerTest {
 protected:
  void TearDown() override {
    clients_.clear();
    UvServerTest::TearDown();
  }

  bool Exists(const std::string& key) {
    absl::StatusOr<Reply> r = server_->Command({"EXISTS", key});
    return !r.ok() || !r->is_integer() || r->integer != 0;
  }
  // The key's PTTL in ms (-2 gone, -1 no TTL).
  int64_t Pttl(const std::string& key) {
    absl::StatusOr<Reply> r = server_->Command({"PTTL", key});
    return r.ok() && r->is_integer() ? r->integer : -3;
  }

  std::vector<std::unique_ptr<Contender>> clients_;
};

TEST_F(HandOffRealTest, SeparateClientsShareOneLockByHandOffsExclusivelyAndLeaveNoQueue) {
  constexpr int kClients = 4;
  constexpr int kSections = 200;
  Ledger ledger;
  const int target = kSections;
  for (int i = 0; i < kClients; ++i) {
    Transport* conn = uv_.Hiredis(server_->port());
    ASSERT_NE(conn, nullptr);
    clients_.push_back(std::make_unique<Contender>(uv_.loop(), conn, &ledger, &target));
  }
  for (auto& c : clients_) c->Start();
  auto all_idle = [&] {
    for (const auto& c : clients_) {
      if (!c->idle()) return false;
    }
    return true;
  };
  ASSERT_TRUE(uv_.RunUntil(all_idle, absl::Seconds(120)))
      << ledger.sections << " sections so far";
  ASSERT_EQ(ledger.errors, 0) << ledger.first_error;

  // Exclusive: never two holders at once; fences only grow.
  EXPECT_EQ(ledger.overlaps, 0);
  EXPECT_EQ(ledger.fence_regressions, 0);
  EXPECT_GE(ledger.sections, kSections);
  int64_t attempts = 0, queue_calls = 0;
  for (int i = 0; i < kClients; ++i) {
    // Every client gets its turns (FIFO hand-offs: about kSections /
    // kClients each; a quarter of that is far from a starved client).
    EXPECT_GE(clients_[i]->sections(), kSections / kClients / 4) << "client " << i;
    attempts += clients_[i]->retry().attempts();
    queue_calls += clients_[i]->retry().queue_calls();
  }
  // The lock moved by hand-offs: the queue was in use, and waiters were
  // woken one at a time by their grant (about one attempt per section, the
  // first attempt of each client aside) instead of every waiter racing at
  // each release (about kClients attempts per section).
  EXPECT_GT(queue_calls, 0);
  const double per_section =
      static_cast<double>(attempts - kClients) / static_cast<double>(ledger.sections);
  EXPECT_LE(per_section, 1.5) << attempts << " attempts for " << ledger.sections
                              << " sections";
  std::printf("%d sections, %lld attempts (%.2f per section after the first tries), %lld "
              "queue scripts; sections per client:",
              ledger.sections, static_cast<long long>(attempts), per_section,
              static_cast<long long>(queue_calls));
  for (const auto& c : clients_) std::printf(" %d", c->sections());
  std::printf("\n");

  // Nothing of the queue is left behind: the lock key is gone, and the
  // queue keys are gone or expiring once the clients stop lingering
  // (kHandOffLinger) and leave.
  const KeyScheme keys;
  const std::string channel = keys.ChannelKey("r");
  EXPECT_FALSE(Exists(keys.LockKey("r")));
  const std::string q = HandOffQueueKey(channel), qx = HandOffQueueExpiryKey(channel);
  EXPECT_TRUE(uv_.RunUntil([&] { return !Exists(q) && !Exists(qx); }, absl::Seconds(10)))
      << "queue " << q << " PTTL " << Pttl(q) << ", " << qx << " PTTL " << Pttl(qx);
  for (const std::string& k : {q, qx}) {
    const int64_t ttl = Pttl(k);
    EXPECT_TRUE(ttl == -2 || ttl > 0) << k << " has no TTL";
  }
}

}  // namespace
}  // namespace dlock
