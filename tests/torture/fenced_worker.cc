// One worker process of the fenced torture run (fenced_torture.h): in a
// loop it takes the lock on the counter (BlockingClient, a short TTL), reads
// the counter from the protected store (--store: PostgreSQL or a second
// Redis), and writes it back plus one, recording the increment in the same
// statement / write -- a read-modify-write that only the lock (and, when the
// holder was paused past its TTL, the fence) makes safe. With --fencing the
// read and the write go through the fenced store (PgFencedStore,
// RedisFencedStoreClient) with the lease's fence; without, they are plain
// statements (SELECT / UPDATE; GET / MULTI SET INCR EXEC).
//
// It publishes, in the driver's shared page (--flags): slot[id] = 1 while
// it is between its read and its write (the nemesis pauses it there), and
// counters of writes applied / refused as stale / failed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <hiredis/hiredis.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/blocking/connect.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/pg_store.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/fenced/redis_store_client.h"
#include "dlock/tests/torture/fenced_torture.h"

ABSL_FLAG(std::string, redis, "", "redis://host:port of the lock server");
ABSL_FLAG(std::string, store, "postgres", "the protected store: postgres or redis");
ABSL_FLAG(std::string, pg, "", "--store=postgres: libpq conninfo of the PostgreSQL server");
ABSL_FLAG(int, store_port, 0,
          "--store=redis: port of the protected redis-server on 127.0.0.1 (not the lock's)");
ABSL_FLAG(std::string, flags, "", "path of the driver's shared page");
ABSL_FLAG(int, id, 0, "worker id (slot in the shared page)");
ABSL_FLAG(bool, fencing, true, "fence the writes");
ABSL_FLAG(bool, fence_reads, true,
          "with --fencing: read through the store too (--nofence_reads shows why it must)");
ABSL_FLAG(int, ttl_ms, 300, "lease TTL");
ABSL_FLAG(int, seconds, 10, "how long to run");

namespace dlock {
namespace torture {
namespace {

// The protected store, as the worker uses it: read the counter, write it
// back (and count the increment in the same statement / write). A fence of
// 0 means unfenced (plain statements).
class Store {
 public:
  virtual ~Store() = default;
  virtual absl::StatusOr<int64_t> Read(int64_t fence) = 0;
  virtual absl::Status Write(int64_t fence, int64_t value, int id) = 0;
};

class PgStore : public Store {
 public:
  explicit PgStore(std::unique_ptr<fenced::PgFencedStore> db) : db_(std::move(db)) {}

  absl::StatusOr<int64_t> Read(int64_t fence) override {
    const std::string sql = "SELECT value FROM counter WHERE id = 1";
    absl::StatusOr<fenced::PgResult> r =
        fence > 0 ? db_->Write(kFencedResource, fence, sql) : db_->Exec(sql);
    if (!r.ok()) return r.status();
    int64_t value = 0;
    if (r->rows.empty() || !r->rows[0][0] || !absl::SimpleAtoi(*r->rows[0][0], &value)) {
      return absl::InternalError("no counter row");
    }
    return value;
  }

  absl::Status Write(int64_t fence, int64_t value, int id) override {
    const std::string sql =
        "WITH i AS (INSERT INTO increments (worker, fence) VALUES ($2, $3)) "
        "UPDATE counter SET value = $1 WHERE id = 1";
    const std::vector<fenced::PgParam> params = {absl::StrCat(value), absl::StrCat(id),
                                                 absl::StrCat(fence)};
    return (fence > 0 ? db_->Write(kFencedResource, fence, sql, params)
                      : db_->Exec(sql, params))
        .status();
  }

 private:
  std::unique_ptr<fenced::PgFencedStore> db_;
};

// The second Redis: fenced through RedisFencedStoreClient (the read is an
// IncrBy of 0, which returns the value and records the fence), unfenced
// through a plain synchronous hiredis connection.
class RedisStore : public Store {
 public:
  RedisStore(std::unique_ptr<fenced::RedisFencedStoreClient> fenced, int port)
      : fenced_(std::move(fenced)), port_(port) {}
  ~RedisStore() override {
    if (plain_ != nullptr) redisFree(plain_);
  }

  absl::StatusOr<int64_t> Read(int64_t fence) override {
    if (fence > 0) {
      absl::StatusOr<fenced::RedisWriteResult> r = fenced_->Write(
          kFencedResource, fence, fenced::RedisWrite().IncrBy(kFencedRedisCounterKey, 0));
      if (!r.ok()) return r.status();
      if (r->values.size() != 1) return absl::InternalError("IncrBy 0: no value");
      return r->values[0];
    }
    absl::StatusOr<std::vector<std::string>> r = Plain({{"GET", kFencedRedisCounterKey}});
    if (!r.ok()) return r.status();
    int64_t value = 0;
    if (!(*r)[0].empty() && !absl::SimpleAtoi((*r)[0], &value)) {
      return absl::InternalError(absl::StrCat("GET: not an integer: ", (*r)[0]));
    }
    return value;
  }

  absl::Status Write(int64_t fence, int64_t value, int /*id*/) override {
    if (fence > 0) {
      return fenced_
          ->Write(kFencedResource, fence,
                  fenced::RedisWrite()
                      .Set(kFencedRedisCounterKey, absl::StrCat(value))
                      .IncrBy(kFencedRedisIncrementsKey, 1))
          .status();
    }
    // Atomic like the fenced write (a kill -9 inside it discards it).
    return Plain({{"MULTI"},
                  {"SET", kFencedRedisCounterKey, absl::StrCat(value)},
                  {"INCR", kFencedRedisIncrementsKey},
                  {"EXEC"}})
        .status();
  }

 private:
  // Sends the commands one after the other on the plain connection
  // (reconnecting when it is gone); their replies as text ("" for nil).
  absl::StatusOr<std::vector<std::string>> Plain(
      const std::vector<std::vector<std::string>>& commands) {
    if (plain_ == nullptr) {
      timeval tv = {2, 0};
      plain_ = redisConnectWithTimeout("127.0.0.1", port_, tv);
      if (plain_ == nullptr || plain_->err != 0) {
        std::string e = plain_ != nullptr ? plain_->errstr : "out of memory";
        if (plain_ != nullptr) redisFree(plain_);
        plain_ = nullptr;
        return absl::UnavailableError(absl::StrCat("connect: ", e));
      }
      redisSetTimeout(plain_, tv);
    }
    std::vector<std::string> out;
    for (const std::vector<std::string>& argv : commands) {
      std::vector<const char*> ptrs;
      std::vector<size_t> lens;
      for (const std::string& a : argv) {
        ptrs.push_back(a.data());
        lens.push_back(a.size());
      }
      redisReply* reply = static_cast<redisReply*>(
          redisCommandArgv(plain_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
      if (reply == nullptr) {
        std::string e = plain_->errstr;
        redisFree(plain_);
        plain_ = nullptr;
        return absl::UnavailableError(absl::StrCat(argv[0], ": ", e));
      }
      absl::Status s;
      if (reply->type == REDIS_REPLY_ERROR) {
        s = absl::InternalError(absl::StrCat(argv[0], ": ", std::string(reply->str, reply->len)));
      } else if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) {
        out.emplace_back(reply->str, reply->len);
      } else if (reply->type == REDIS_REPLY_INTEGER) {
        out.push_back(absl::StrCat(reply->integer));
      } else {
        out.emplace_back();
      }
      freeReplyObject(reply);
      if (!s.ok()) return s;
    }
    return out;
  }

  std::unique_ptr<fenced::RedisFencedStoreClient> fenced_;
  int port_;
  redisContext* plain_ = nullptr;
};

absl::StatusOr<std::unique_ptr<Store>> ConnectStore(int id) {
  const std::string kind = absl::GetFlag(FLAGS_store);
  if (kind == FencedStoreName(FencedStoreKind::kPostgres)) {
    fenced::PgStoreOptions options;
    options.conninfo = absl::GetFlag(FLAGS_pg);
    auto db = fenced::PgFencedStore::Connect(options);
    if (!db.ok()) return db.status();
    return std::unique_ptr<Store>(new PgStore(std::move(*db)));
  }
  if (kind == FencedStoreName(FencedStoreKind::kRedis)) {
    const int port = absl::GetFlag(FLAGS_store_port);
    auto client =
        fenced::RedisFencedStoreClient::Connect(absl::StrCat("redis://127.0.0.1:", port));
    if (!client.ok()) return client.status();
    if ((*client)->DataKey(kFencedResource, "counter:") != kFencedRedisCounterKey ||
        (*client)->DataKey(kFencedResource, "increments:") != kFencedRedisIncrementsKey) {
      return absl::InternalError("kFencedRedis*Key do not match RedisFencedStore::DataKey");
    }
    return std::unique_ptr<Store>(new RedisStore(std::move(*client), port));
  }
  return absl::InvalidArgumentError(absl::StrCat("worker ", id, ": bad --store ", kind));
}

int Run() {
  const int id = absl::GetFlag(FLAGS_id);
  int fd = open(absl::GetFlag(FLAGS_flags).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 || id < 0 || id >= kFencedMaxWorkers) return 2;
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 2;
  std::atomic<int32_t>* slots = static_cast<std::atomic<int32_t>*>(p);

  ConnectOptions options;
  options.redis_urls = {absl::GetFlag(FLAGS_redis)};
  auto client = ConnectBlockingClient(options);
  if (!client.ok()) {
    fprintf(stderr, "worker %d: %s\n", id, client.status().ToString().c_str());
    return 2;
  }
  const bool fencing = absl::GetFlag(FLAGS_fencing);
  const bool fence_reads = fencing && absl::GetFlag(FLAGS_fence_reads);
  const absl::Duration ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  absl::StatusOr<std::unique_ptr<Store>> store = ConnectStore(id);
  if (!store.ok()) {
    fprintf(stderr, "worker %d: %s\n", id, store.status().ToString().c_str());
    return 2;
  }
  while (absl::Now() < end) {
    auto guard = (*client)->Lock(kFencedResource, ttl, absl::Seconds(2));
    if (!guard.ok()) continue;
    const int64_t fence = guard->lease().fence;
    // With fencing the read goes through the store too: it records this
    // holder's fence, so an older holder that has read but not yet written
    // is refused from now on (a fenced write alone would accept its write
    // while this holder has read but not written, and this holder's write
    // would then overwrite it).
    absl::StatusOr<int64_t> value = (*store)->Read(fence_reads ? fence : 0);
    if (fenced::IsStaleFence(value.status())) {
      slots[kFencedStaleSlot + id].fetch_add(1);
      continue;
    }
    if (!value.ok()) {
      slots[kFencedErrorSlot + id].fetch_add(1);
      fprintf(stderr, "worker %d: read: %s\n", id, value.status().ToString().c_str());
      continue;
    }
    // Between the read and the write: the nemesis may pause us here, past
    // the lease's TTL. A few ms of "work" give it the chance.
    slots[id].store(1);
    absl::SleepFor(absl::Milliseconds(3));
    absl::Status w = (*store)->Write(fencing ? fence : 0, *value + 1, id);
    slots[id].store(0);
    if (w.ok()) {
      slots[kFencedAppliedSlot + id].fetch_add(1);
    } else if (fenced::IsStaleFence(w)) {
      slots[kFencedStaleSlot + id].fetch_add(1);
    } else {
      slots[kFencedErrorSlot + id].fetch_add(1);
      fprintf(stderr, "worker %d: write: %s\n", id, w.ToString().c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace torture
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::torture::Run();
}
