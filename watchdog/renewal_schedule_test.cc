// RenewalSchedule's intrusive heaps against a reference model (std::set of
// (time, seq)), and CompactTime's exactness.
#include "dlock/watchdog/renewal_schedule.h"

#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "dlock/transport/fake/manual_event_loop.h"

namespace dlock {
namespace watchdog_internal {
namespace {

using Key = std::pair<absl::Time, uint64_t>;

std::vector<uint64_t> Seqs(const std::vector<ScheduleSlot*>& slots) {
  std::vector<uint64_t> seqs;
  for (const ScheduleSlot* s : slots) seqs.push_back(s->seq);
  return seqs;
}

std::vector<uint64_t> UpTo(const std::set<Key>& model, absl::Time bound) {
  std::vector<uint64_t> seqs;
  for (const Key& k : model) {
    if (k.first > bound) break;
    seqs.push_back(k.second);
  }
  return seqs;
}

TEST(RenewalScheduleTest, MatchesAnOrderedSetUnderRandomMoves) {
  ManualEventLoop loop;
  RenewalSchedule schedule(&loop, [] {});
  const absl::Time t0 = loop.Now();
  constexpr int kSlots = 300;
  std::vector<ScheduleSlot> slots(kSlots);
  for (int i = 0; i < kSlots; ++i) slots[i].seq = i + 1;
  std::vector<absl::Time> renew(kSlots, absl::InfiniteFuture());
  std::vector<absl::Time> deadline(kSlots, absl::InfiniteFuture());
  std::set<Key> renew_model, deadline_model;
  std::mt19937 rng(23);
  // Few distinct times, so many ties (ordered by seq).
  auto random_time = [&] {
    if (rng() % 8 == 0) return absl::InfiniteFuture();
    return t0 + absl::Milliseconds(rng() % 40) + absl::Nanoseconds(1) / 4 * (rng() % 3);
  };
  for (int step = 0; step < 20000; ++step) {
    const int i = rng() % kSlots;
    const uint64_t seq = slots[i].seq;
    switch (rng() % 3) {
      case 0: {
        const absl::Time t = random_time();
        renew_model.erase({renew[i], seq});
        schedule.SetRenewAt(slots[i], t);
        renew[i] = t;
        if (t != absl::InfiniteFuture()) renew_model.insert({t, seq});
        break;
      }
      case 1: {
        const absl::Time t = random_time();
        deadline_model.erase({deadline[i], seq});
        schedule.SetDeadline(slots[i], t);
        deadline[i] = t;
        if (t != absl::InfiniteFuture()) deadline_model.insert({t, seq});
        break;
      }
      default:
        renew_model.erase({renew[i], seq});
        deadline_model.erase({deadline[i], seq});
        schedule.Remove(slots[i]);
        renew[i] = deadline[i] = absl::InfiniteFuture();
    }
    ASSERT_EQ(schedule.RenewAt(slots[i]), renew[i]);
    ASSERT_EQ(schedule.DeadlineAt(slots[i]), deadline[i]);
    ASSERT_EQ(schedule.with_deadline(), deadline_model.size());
    if (step % 50 == 0) {
      const absl::Time bound = t0 + absl::Milliseconds(rng() % 45);
      ASSERT_EQ(Seqs(schedule.RenewalsDue(bound)), UpTo(renew_model, bound)) << step;
      ASSERT_EQ(Seqs(schedule.DeadlinesPassed(bound)), UpTo(deadline_model, bound)) << step;
    }
  }
  schedule.Clear();
}

TEST(CompactTimeTest, ExactForQuarterNanosecondsAndInfinities) {
  const absl::Time epoch = ManualEventLoop::Origin();
  CompactTime clock(epoch);
  for (absl::Duration d : {absl::ZeroDuration(), absl::Milliseconds(100) / 3,
                           absl::Seconds(30) / 7, -absl::Nanoseconds(1) / 4,
                           absl::Hours(24 * 365 * 50) + absl::Nanoseconds(1) / 4}) {
    EXPECT_EQ(CompactTime::TicksDuration(CompactTime::DurationTicks(d)), d);
    EXPECT_EQ(clock.At(clock.Ticks(epoch + d)), epoch + d);
  }
  EXPECT_EQ(clock.At(clock.Ticks(absl::InfiniteFuture())), absl::InfiniteFuture());
  EXPECT_EQ(clock.At(clock.Ticks(absl::InfinitePast())), absl::InfinitePast());
  EXPECT_EQ(CompactTime::TicksDuration(CompactTime::DurationTicks(absl::InfiniteDuration())),
            absl::InfiniteDuration());
  // Beyond the range a finite time saturates but stays finite.
  EXPECT_NE(clock.At(clock.Ticks(epoch + absl::Hours(24 * 365 * 500))),
            absl::InfiniteFuture());
}

}  // namespace
}  // namespace watchdog_internal
}  // namespace dlock
