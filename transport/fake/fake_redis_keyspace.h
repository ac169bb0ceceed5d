// Internal to //transport/fake: FakeRedis's clock and keyspace. Not a
// public API.
//
// `ServerClock` is the server's wall clock, driven by an EventLoop (so a
// ManualEventLoop drives it in virtual time). `Keyspace` holds the values
// and expires them on that clock; it is the only way the command families
// (fake_redis_strings.h, fake_redis_hashes.h, ...) reach the data.
//
// Not thread-safe: call only on the thread running the server's loop.
#ifndef DLOCK_TRANSPORT_FAKE_FAKE_REDIS_KEYSPACE_H_
#define DLOCK_TRANSPORT_FAKE_FAKE_REDIS_KEYSPACE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dlock/transport/event_loop.h"

namespace dlock {
namespace fake_redis_internal {

// The server's time:
//   start_time + (loop->Now() - loop->Now() at construction) + jumps
// so it advances exactly with the loop and `Jump` moves it.
class ServerClock {
 public:
  ServerClock(EventLoop* loop, absl::Time start_time);
  ServerClock(const ServerClock&) = delete;
  ServerClock& operator=(const ServerClock&) = delete;

  absl::Time Now() const;
  // Now() in Unix milliseconds.
  int64_t NowMs() const { return absl::ToUnixMillis(Now()); }
  // Loop time since construction (jumps do not count): INFO's uptime.
  absl::Duration Uptime() const;
  // Moves the clock by `d`, forward or back.
  void Jump(absl::Duration d) { jump_ += d; }

 private:
  EventLoop* loop_;
  absl::Time start_time_;
  absl::Time loop_origin_;
  absl::Duration jump_ = absl::ZeroDuration();
};

// One key's value: a string, a hash or a sorted set, and its deadline.
struct Value {
  enum class Kind { kString, kHash, kZSet };
  Kind kind = Kind::kString;
  std::string str;
  // Hash fields in insertion order (like a listpack).
  std::vector<std::pair<std::string, std::string>> hash;
  // A sorted set: each member's score, and the (score, member) order.
  std::map<std::string, double> zscore;
  std::set<std::pair<double, std::string>> zorder;
  int64_t expire_ms = -1;  // absolute server time (Unix ms); -1: none
};

// The keys and their values. A key is alive up to and at its deadline and
// expired after it (as in Redis); every lookup deletes an expired key, so
// no caller ever sees one.
class Keyspace {
 public:
  // `clock` must outlive the keyspace.
  explicit Keyspace(const ServerClock* clock) : clock_(clock) {}
  Keyspace(const Keyspace&) = delete;
  Keyspace& operator=(const Keyspace&) = delete;

  // The live value at `key`, or null if there is none.
  Value* Find(absl::string_view key);
  // A lookup for a command on values of `kind` (the type check): false if
  // `key` holds another kind (WRONGTYPE); else true with *value set to the
  // live value, or to null if there is none.
  bool Lookup(absl::string_view key, Value::Kind kind, Value** value);
  // Stores a fresh value of `kind` (empty, no deadline) at `key`,
  // replacing any, and returns it.
  Value* Create(const std::string& key, Value::Kind kind);
  // Deletes `key`. Returns whether it was alive.
  bool Delete(absl::string_view key);
  // Deletes every key.
  void Clear() { db_.clear(); }

  // The time `key` has left in ms: -2 if missing, -1 if it has no deadline
  // (as PTTL answers).
  int64_t PTtl(absl::string_view key);

  // The live keys, sorted.
  std::vector<std::string> Keys();
  // How many keys are alive.
  size_t Size();
  // The server clock in Unix milliseconds (deadlines are on it).
  int64_t NowMs() const { return clock_->NowMs(); }

 private:
  void ExpireAllDue();

  const ServerClock* clock_;
  absl::flat_hash_map<std::string, Value> db_;
};

}  // namespace fake_redis_internal
}  // namespace dlock

#endif  // DLOCK_TRANSPORT_FAKE_FAKE_REDIS_KEYSPACE_H_
