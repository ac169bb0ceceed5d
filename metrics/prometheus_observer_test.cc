// PrometheusLockObserver on the fake in virtual time: scripted scenarios
// with SimpleLock, RetryLock, Watchdog and RedLock over three FakeRedis
// servers, then exact metric values read back by collecting the registry.
#include "dlock/metrics/prometheus_observer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "dlock/lock/lock.h"
#include "dlock/lock/lock_commands.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/scripts.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/testing/status_matchers.h"
#include "dlock/transport/fake/fake_redis.h"
#include "dlock/transport/fake/fake_transport.h"
#include "dlock/transport/fake/manual_event_loop.h"
#include "dlock/watchdog/watchdog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace dlock {
namespace {

using ::dlock::test_support::IsOk;
using ::dlock::test_support::StatusIs;
using Labels = std::map<std::string, std::string>;

// Reads one series out of a registry.
class Scrape {
 public:
  explicit Scrape(const prometheus::Registry& registry) : families_(registry.Collect()) {}

  // The series of family `name` whose labels are exactly `labels`.
  std::optional<prometheus::ClientMetric> Find(const std::string& name,
                                               const Labels& labels) const {
    for (const prometheus::MetricFamily& f : families_) {
      if (f.name != name) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        Labels have;
        for (const auto& l : m.label) have[l.name] = l.value;
        if (have == labels) return m;
      }
    }
    return std::nullopt;
  }
  std::optional<double> Counter(const std::string& name, const Labels& labels) const {
    auto m = Find(name, labels);
    if (!m) return std::nullopt;
    return m->counter.value;
  }
  std::optional<double> Gauge(const std::string& name, const Labels& labels = {}) const {
    auto m = Find(name, labels);
    if (!m) return std::nullopt;
    return m->gauge.value;
  }
  std::optional<uint64_t> HistCount(const std::string& name, const Labels& labels) const {
    auto m = Find(name, labels);
    if (!m) return std::nullopt;
    return m->histogram.sample_count;
  }
  std::optional<double> HistSum(const std::string& name, const Labels& labels) const {
    auto m = Find(name, labels);
    if (!m) return std::nullopt;
    return m->histogram.sample_sum;
  }
  // Cumulative count of the bucket with upper bound `le`.
  std::optional<uint64_t> Bucket(const std::string& name, const Labels& labels, double le) const {
    auto m = Find(name, labels);
    if (!m) return std::nullopt;
    for (const auto& b : m->histogram.bucket) {
      if (b.upper_bound == le) return b.cumulative_count;
    }
    return std::nullopt;
  }
  // Every series of every family, for checks across all of them.
  const std::vector<prometheus::MetricFamily>& families() const { return families_; }

 private:
  std::vector<prometheus::MetricFamily> families_;
};

Labels P(const std::string& policy, const std::string& outcome) {
  return {{"policy", policy}, {"outcome", outcome}};
}
Labels O(const std::string& outcome) { return {{"outcome", outcome}}; }

AcquireOptions Ttl(absl::Duration ttl, absl::Duration wait = absl::ZeroDuration()) {
  AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

class PrometheusObserverTest : public ::testing::Test {
 protected:
  PrometheusObserverTest() : registry_(std::make_shared<prometheus::Registry>()) {
    for (int i = 0; i < 3; ++i) {
      servers_.push_back(std::make_unique<FakeRedis>(&loop_));
      servers_.back()->Execute(TrustDataSetCommand(KeyScheme{}));  // never used: no window
      // Scripts already cached: every command is one EVALSHA round trip.
      for (const NamedScript& s : AllScripts()) {
        servers_.back()->Execute({"SCRIPT", "LOAD", s.script->source()});
      }
    }
    auto observer = PrometheusLockObserver::Create(registry_);
    EXPECT_THAT(observer.status(), IsOk());
    observer_ = *std::move(observer);
  }

  // A new connection to server i with a 1 ms round trip.
  FakeTransport* Connect(int i = 0) {
    conns_.push_back(std::make_unique<FakeTransport>(&loop_, servers_[i].get()));
    conns_.back()->SetLatency(absl::Milliseconds(1));
    return conns_.back().get();
  }

  SimpleLockOptions Simple() {
    SimpleLockOptions o;
    o.observer = observer_.get();
    return o;
  }

  // Runs the loop until `done` (bounded, in virtual time).
  template <typename Done>
  void RunUntil(Done done) {
    for (int i = 0; i < 100000 && !done(); ++i) loop_.AdvanceTime(absl::Milliseconds(1));
  }

  absl::StatusOr<Lease> AcquireNow(Lock& lock, const std::string& resource,
                                   AcquireOptions options) {
    std::optional<absl::StatusOr<Lease>> out;
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire(resource, options, [&](absl::StatusOr<Lease> r) { out = std::move(r); });
    if (!h.ok()) return h.status();
    RunUntil([&] { return out.has_value(); });
    return out.value_or(absl::UnknownError("never answered"));
  }
  absl::Status ReleaseNow(Lock& lock, const Lease& lease) {
    std::optional<absl::Status> out;
    absl::Status s = lock.Release(lease, [&](absl::Status r) { out = r; });
    if (!s.ok()) return s;
    RunUntil([&] { return out.has_value(); });
    return out.value_or(absl::UnknownError("never answered"));
  }
  absl::StatusOr<Lease> ExtendNow(Lock& lock, const Lease& lease, absl::Duration ttl) {
    std::optional<absl::StatusOr<Lease>> out;
    absl::Status s = lock.Extend(lease, ttl, [&](absl::StatusOr<Lease> r) { out = r; });
    if (!s.ok()) return s;
    RunUntil([&] { return out.has_value(); });
    return out.value_or(absl::UnknownError("never answered"));
  }

  Scrape Collect() const { return Scrape(*registry_); }

  ManualEventLoop loop_;
  std::vector<std::unique_ptr<FakeRedis>> servers_;
  std::vector<std::unique_ptr<FakeTransport>> conns_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<PrometheusLockObserver> observer_;
  KeyScheme keys_;
};

TEST_F(PrometheusObserverTest, SimpleLockAcquireBusyExtendReleaseAreCountedExactly) {
  SimpleLock a(&loop_, Connect(), Simple());
  SimpleLock b(&loop_, Connect(), Simple());

  absl::StatusOr<Lease> lease = AcquireNow(a, "orders/42", Ttl(absl::Seconds(10)));
  ASSERT_THAT(lease, IsOk());
  EXPECT_EQ(Collect().Gauge("dlock_leases_held"), 1.0);

  EXPECT_THAT(AcquireNow(b, "orders/42", Ttl(absl::Seconds(10))),
              StatusIs(absl::StatusCode::kAborted));
  ASSERT_THAT(ExtendNow(a, *lease, absl::Seconds(20)), IsOk());
  EXPECT_EQ(Collect().Gauge("dlock_leases_held"), 1.0);
  ASSERT_THAT(ReleaseNow(a, *lease), IsOk());
  // A second release of the same lease: not the owner any more.
  EXPECT_THAT(ReleaseNow(a, *lease), StatusIs(absl::StatusCode::kFailedPrecondition));

  Scrape s = Collect();
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "aborted")), 1.0);
  EXPECT_EQ(s.Counter("dlock_extend_total", P("simple", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_release_total", P("simple", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_release_total", P("simple", "failed_precondition")), 1.0);
  // Only outcomes that happened have series.
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "unavailable")), std::nullopt);
  // One round trip of 1 ms each, in virtual time: exact.
  EXPECT_EQ(s.HistCount("dlock_acquire_latency_seconds", P("simple", "ok")), 1u);
  EXPECT_DOUBLE_EQ(*s.HistSum("dlock_acquire_latency_seconds", P("simple", "ok")), 0.001);
  EXPECT_EQ(s.Bucket("dlock_acquire_latency_seconds", P("simple", "ok"), 0.0005), 0u);
  EXPECT_EQ(s.Bucket("dlock_acquire_latency_seconds", P("simple", "ok"), 0.001), 1u);
  EXPECT_DOUBLE_EQ(*s.HistSum("dlock_acquire_latency_seconds", P("simple", "aborted")), 0.001);
  // A single attempt never waits.
  EXPECT_EQ(s.HistCount("dlock_acquire_wait_seconds", P("simple", "ok")), 1u);
  EXPECT_EQ(s.HistSum("dlock_acquire_wait_seconds", P("simple", "ok")), 0.0);
  // +1 acquire, -1 release; the failed second release changes nothing.
  EXPECT_EQ(s.Gauge("dlock_leases_held"), 0.0);
}

TEST_F(PrometheusObserverTest, RetryLockReportsTheWholeWaitAndCountsTheLeaseOnce) {
  FakeTransport* holder_conn = Connect();
  FakeTransport* waiter_conn = Connect();
  SimpleLock holder(&loop_, holder_conn, Simple());
  SimpleLock inner(&loop_, waiter_conn, Simple());
  RetryLockOptions ro;
  ro.observer = observer_.get();
  ro.jitter = [](absl::Duration cap) { return cap; };
  ro.initial_backoff = absl::Seconds(10);  // only the release notification wakes it
  ro.max_backoff = absl::Seconds(10);
  RetryLock retry(&loop_, &inner, ro);

  absl::StatusOr<Lease> held = AcquireNow(holder, "job", Ttl(absl::Seconds(30)));
  ASSERT_THAT(held, IsOk());
  std::optional<absl::StatusOr<Lease>> got;
  ASSERT_THAT(retry.Acquire("job", Ttl(absl::Seconds(30), absl::Seconds(5)),
                            [&](absl::StatusOr<Lease> r) { got = std::move(r); }),
              IsOk());
  loop_.AdvanceTime(absl::Milliseconds(100));
  EXPECT_FALSE(got.has_value());
  const absl::Time released_at = loop_.Now();
  ASSERT_THAT(ReleaseNow(holder, *held), IsOk());
  RunUntil([&] { return got.has_value(); });
  ASSERT_TRUE(got.has_value());
  ASSERT_THAT(*got, IsOk());
  const int64_t attempts = retry.attempts();

  Scrape s = Collect();
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("retry", "ok")), 1.0);
  // The inner lock reports each attempt: the holder's and the waiter's last
  // one succeeded, every earlier attempt of the waiter met the lock.
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "ok")), 2.0);
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "aborted")),
            static_cast<double>(attempts - 1));
  EXPECT_EQ(s.Counter("dlock_acquire_retries_total", P("retry", "aborted")),
            static_cast<double>(attempts - 1));
  // The wait lasted from the Acquire (at 1 ms) past the release (+1 ms
  // round trip), so more than the 99 ms before the release was sent.
  ASSERT_EQ(s.HistCount("dlock_acquire_latency_seconds", P("retry", "ok")), 1u);
  EXPECT_GT(*s.HistSum("dlock_acquire_latency_seconds", P("retry", "ok")),
            absl::ToDoubleSeconds(released_at - ManualEventLoop::Origin()) - 0.001 - 0.001);
  EXPECT_GT(*s.HistSum("dlock_acquire_wait_seconds", P("retry", "ok")), 0.0);
  // holder +1, waiter's inner attempt +1, the retry's own success is the
  // same lease (not counted again), holder's release -1.
  EXPECT_EQ(s.Gauge("dlock_leases_held"), 1.0);
}

TEST_F(PrometheusObserverTest, WatchdogRenewalsMarginsAndALostLease) {
  SimpleLock lock(&loop_, Connect(), Simple());
  WatchdogOptions wo;
  wo.observer = observer_.get();
  Watchdog watchdog(&loop_, &lock, wo);

  absl::StatusOr<Lease> lease = AcquireNow(lock, "report", Ttl(absl::Seconds(3)));
  ASSERT_THAT(lease, IsOk());
  std::optional<absl::Status> lost;
  WatchOptions options;
  options.on_lost = [&](absl::Status why) { lost = why; };
  absl::StatusOr<WatchHandle> watch = watchdog.Watch(*lease, std::move(options));
  ASSERT_THAT(watch, IsOk());

  // Renewed every ttl/3 = 1 s after the previous send; the deadline is
  // that send + ttl - drift, and the renewal is due at deadline - ttl +
  // 1 s, so each goes out with ttl - 1 s = 2 s left.
  loop_.AdvanceTime(absl::Milliseconds(3500));
  Scrape before = Collect();
  ASSERT_EQ(before.Counter("dlock_renewal_total", O("ok")), 3.0);
  EXPECT_DOUBLE_EQ(*before.HistSum("dlock_renewal_margin_seconds", O("ok")), 3 * 2.0);
  EXPECT_EQ(before.Bucket("dlock_renewal_margin_seconds", O("ok"), 1.0), 0u);
  EXPECT_EQ(before.Bucket("dlock_renewal_margin_seconds", O("ok"), 2.5), 3u);
  EXPECT_EQ(before.Gauge("dlock_leases_held"), 1.0);

  // Someone deletes the key: the next renewal is refused, the lease is lost.
  ASSERT_TRUE(servers_[0]->Evict(keys_.LockKey("report")));
  RunUntil([&] { return lost.has_value(); });
  ASSERT_TRUE(lost.has_value());
  EXPECT_THAT(*lost, StatusIs(absl::StatusCode::kFailedPrecondition));

  Scrape s = Collect();
  EXPECT_EQ(s.Counter("dlock_renewal_total", O("ok")), 3.0);
  EXPECT_EQ(s.Counter("dlock_renewal_total", O("failed_precondition")), 1.0);
  EXPECT_DOUBLE_EQ(*s.HistSum("dlock_renewal_margin_seconds", O("failed_precondition")), 2.0);
  EXPECT_EQ(s.Counter("dlock_leases_lost_total", O("failed_precondition")), 1.0);
  // The watchdog's extends are the lock's extends too.
  EXPECT_EQ(s.Counter("dlock_extend_total", P("simple", "ok")), 3.0);
  EXPECT_EQ(s.Counter("dlock_extend_total", P("simple", "failed_precondition")), 1.0);
  EXPECT_EQ(s.Gauge("dlock_leases_held"), 0.0);
}

TEST_F(PrometheusObserverTest, RedLockRoundWithOneServerPartitionedCountsVotesPerServer) {
  std::vector<Transport*> transports = {Connect(0), Connect(1), Connect(2)};
  conns_[2]->Partition();
  RedLockOptions ro;
  ro.observer = observer_.get();
  ro.retry_count = 0;
  ro.server_names = {"a:6379", "b:6379", "c:6379"};
  absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(&loop_, transports, ro);
  ASSERT_THAT(redlock, IsOk());

  absl::StatusOr<Lease> lease = AcquireNow(**redlock, "orders/7", Ttl(absl::Seconds(10)));
  ASSERT_THAT(lease, IsOk());
  ASSERT_THAT(ReleaseNow(**redlock, *lease), IsOk());

  Scrape s = Collect();
  auto vote = [](const std::string& op, const std::string& server, const std::string& outcome) {
    return Labels{{"op", op}, {"server", server}, {"outcome", outcome}};
  };
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("acquire", "a:6379", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("acquire", "b:6379", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("acquire", "c:6379", "unavailable")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("release", "a:6379", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("release", "b:6379", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("release", "c:6379", "unavailable")), 1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total", vote("acquire", "c:6379", "ok")), std::nullopt);
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("redlock", "ok")), 1.0);
  EXPECT_EQ(s.Counter("dlock_release_total", P("redlock", "ok")), 1.0);
  EXPECT_EQ(s.Gauge("dlock_leases_held"), 0.0);
}

TEST_F(PrometheusObserverTest, RedLockServersWithoutNamesAreLabelledByIndex) {
  std::vector<Transport*> transports = {Connect(0), Connect(1), Connect(2)};
  conns_[1]->Partition();
  RedLockOptions ro;
  ro.observer = observer_.get();
  ro.retry_count = 0;
  absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(&loop_, transports, ro);
  ASSERT_THAT(redlock, IsOk());
  ASSERT_THAT(AcquireNow(**redlock, "x", Ttl(absl::Seconds(10))), IsOk());
  Scrape s = Collect();
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total",
                      {{"op", "acquire"}, {"server", "0"}, {"outcome", "ok"}}),
            1.0);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total",
                      {{"op", "acquire"}, {"server", "1"}, {"outcome", "unavailable"}}),
            1.0);
}

TEST_F(PrometheusObserverTest, LateGrantsReleasedAgainAreCountedByPolicyOpAndReason) {
  // A SimpleLock acquire cancelled after it was sent: its grant comes back
  // late and is released.
  SimpleLock a(&loop_, Connect(), Simple());
  absl::StatusOr<AcquireHandle> h =
      a.Acquire("r", Ttl(absl::Seconds(10)), [](absl::StatusOr<Lease>) { ADD_FAILURE(); });
  ASSERT_THAT(h, IsOk());
  EXPECT_TRUE(h->Cancel());
  // A RedLock lease released while an Extend of it is in flight: the three
  // extends that come back are released again.
  RedLockOptions ro;
  ro.observer = observer_.get();
  absl::StatusOr<std::unique_ptr<RedLock>> redlock =
      RedLock::Create(&loop_, {Connect(0), Connect(1), Connect(2)}, ro);
  ASSERT_THAT(redlock, IsOk());
  absl::StatusOr<Lease> lease = AcquireNow(**redlock, "orders/7", Ttl(absl::Seconds(10)));
  ASSERT_THAT(lease, IsOk());
  std::optional<absl::StatusOr<Lease>> extended;
  ASSERT_THAT((*redlock)->Extend(*lease, absl::Seconds(10),
                                 [&](absl::StatusOr<Lease> r) { extended = std::move(r); }),
              IsOk());
  ASSERT_THAT(ReleaseNow(**redlock, *lease), IsOk());
  RunUntil([&] { return extended.has_value(); });
  EXPECT_THAT(*extended, StatusIs(absl::StatusCode::kFailedPrecondition));
  loop_.AdvanceTime(absl::Seconds(1));

  Scrape s = Collect();
  auto late = [](const std::string& policy, const std::string& op, const std::string& reason) {
    return Labels{{"policy", policy}, {"op", op}, {"reason", reason}};
  };
  EXPECT_EQ(s.Counter("dlock_late_grants_released_total", late("simple", "acquire", "cancelled")),
            1.0);
  EXPECT_EQ(s.Counter("dlock_late_grants_released_total", late("redlock", "extend", "released")),
            3.0);
  EXPECT_EQ(s.Counter("dlock_late_grants_released_total", late("redlock", "acquire", "released")),
            std::nullopt);
}

TEST_F(PrometheusObserverTest, NoSeriesCarriesTheResourceNameByDefault) {
  SimpleLock a(&loop_, Connect(), Simple());
  const std::string resource = "customer-8812345/invoice";
  absl::StatusOr<Lease> lease = AcquireNow(a, resource, Ttl(absl::Seconds(10)));
  ASSERT_THAT(lease, IsOk());
  ASSERT_THAT(ReleaseNow(a, *lease), IsOk());
  Scrape s = Collect();
  int series = 0;
  for (const auto& f : s.families()) {
    for (const auto& m : f.metric) {
      ++series;
      for (const auto& l : m.label) {
        EXPECT_NE(l.name, "resource");
        EXPECT_NE(l.name, "resource_class");
        EXPECT_FALSE(absl::StrContains(l.value, "customer")) << f.name << " " << l.name;
      }
    }
  }
  EXPECT_GT(series, 0);
}

TEST(PrometheusObserverOptionsTest, ResourceClassAndConstantLabelsAreApplied) {
  auto registry = std::make_shared<prometheus::Registry>();
  PrometheusLockObserver::Options options;
  options.constant_labels = {{"service", "billing"}};
  options.resource_class = [](absl::string_view r) {
    return std::string(r.substr(0, r.find('/')));
  };
  auto observer = PrometheusLockObserver::Create(registry, options);
  ASSERT_THAT(observer.status(), IsOk());
  AcquireEvent e;
  e.policy = "simple";
  e.resource = "orders/1";
  (*observer)->OnAcquire(e);
  e.resource = "orders/2";
  (*observer)->OnAcquire(e);
  RenewalEvent r;
  r.resource = "users/9";
  (*observer)->OnRenewal(r);
  Scrape s(*registry);
  EXPECT_EQ(s.Counter("dlock_acquire_total", {{"service", "billing"},
                                              {"policy", "simple"},
                                              {"resource_class", "orders"},
                                              {"outcome", "ok"}}),
            2.0);
  EXPECT_EQ(s.Counter("dlock_renewal_total",
                      {{"service", "billing"}, {"resource_class", "users"}, {"outcome", "ok"}}),
            1.0);
  EXPECT_EQ(s.Gauge("dlock_leases_held", {{"service", "billing"}}), 2.0);
}

TEST(PrometheusObserverOptionsTest, BadArgumentsAreRejectedWithAStatus) {
  EXPECT_THAT(PrometheusLockObserver::Create(nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  auto registry = std::make_shared<prometheus::Registry>();
  PrometheusLockObserver::Options reserved;
  reserved.constant_labels = {{"outcome", "x"}};
  EXPECT_THAT(PrometheusLockObserver::Create(registry, reserved).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  reserved.constant_labels = {{"reason", "x"}};  // the late grants' label
  EXPECT_THAT(PrometheusLockObserver::Create(registry, reserved).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PrometheusLockObserver::Options bad_name;
  bad_name.constant_labels = {{"not a label", "x"}};
  EXPECT_THAT(PrometheusLockObserver::Create(registry, bad_name).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  PrometheusLockObserver::Options unsorted;
  unsorted.latency_buckets = {1, 0.5};
  EXPECT_THAT(PrometheusLockObserver::Create(registry, unsorted).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A family of the same name but another type is already there.
  prometheus::BuildGauge().Name("dlock_acquire_total").Register(*registry);
  EXPECT_THAT(PrometheusLockObserver::Create(registry).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PrometheusObserverOptionsTest, OutcomeLabelsAreLowerCaseCodeNames) {
  EXPECT_EQ(PrometheusLockObserver::OutcomeLabel(absl::StatusCode::kOk), "ok");
  EXPECT_EQ(PrometheusLockObserver::OutcomeLabel(absl::StatusCode::kDeadlineExceeded),
            "deadline_exceeded");
  EXPECT_EQ(PrometheusLockObserver::OutcomeLabel(static_cast<absl::StatusCode>(99)), "unknown");
}

// Components on different loop threads may share one observer.
TEST(PrometheusObserverOptionsTest, ConcurrentEventsFromSeveralThreadsAreAllCounted) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto observer = PrometheusLockObserver::Create(registry);
  ASSERT_THAT(observer.status(), IsOk());
  constexpr int kThreads = 4;
  constexpr int kEvents = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string policy = t % 2 == 0 ? "simple" : "redlock";
      for (int i = 0; i < kEvents; ++i) {
        AcquireEvent a;
        a.policy = policy;
        a.resource = "r";
        (*observer)->OnAcquire(a);
        ReleaseEvent r;
        r.policy = policy;
        r.resource = "r";
        (*observer)->OnRelease(r);
        ServerVoteEvent v;
        v.operation = "acquire";
        v.server = t;
        (*observer)->OnServerVote(v);
      }
    });
  }
  for (auto& t : threads) t.join();
  Scrape s(*registry);
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("simple", "ok")), 2.0 * kEvents);
  EXPECT_EQ(s.Counter("dlock_acquire_total", P("redlock", "ok")), 2.0 * kEvents);
  EXPECT_EQ(s.Counter("dlock_release_total", P("redlock", "ok")), 2.0 * kEvents);
  EXPECT_EQ(s.Counter("dlock_redlock_votes_total",
                      {{"op", "acquire"}, {"server", "3"}, {"outcome", "ok"}}),
            1.0 * kEvents);
  EXPECT_EQ(s.Gauge("dlock_leases_held"), 0.0);
}

}  // namespace
}  // namespace dlock
