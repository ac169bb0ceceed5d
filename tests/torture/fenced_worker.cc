// One worker process of the fenced torture run (fenced_torture.h): in a
// loop it takes the lock on the counter (BlockingClient, a short TTL), reads
// the counter from PostgreSQL, and writes it back plus one, recording the
// increment in the same statement -- a read-modify-write that only the lock
// (and, when the holder was paused past its TTL, the fence) makes safe.
// With --fencing the write goes through PgFencedStore with the lease's
// fence; without, it is a plain statement.
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

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dlock/blocking/connect.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/pg_store.h"
#include "dlock/tests/torture/fenced_torture.h"

ABSL_FLAG(std::string, redis, "", "redis://host:port of the lock server");
ABSL_FLAG(std::string, pg, "", "libpq conninfo of the PostgreSQL server");
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
  fenced::PgStoreOptions store_options;
  store_options.conninfo = absl::GetFlag(FLAGS_pg);
  auto store = fenced::PgFencedStore::Connect(store_options);
  if (!store.ok()) {
    fprintf(stderr, "worker %d: %s\n", id, store.status().ToString().c_str());
    return 2;
  }
  const bool fencing = absl::GetFlag(FLAGS_fencing);
  const bool fence_reads = absl::GetFlag(FLAGS_fence_reads);
  const absl::Duration ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const std::string write_sql =
      "WITH i AS (INSERT INTO increments (worker, fence) VALUES ($2, $3)) "
      "UPDATE counter SET value = $1 WHERE id = 1";
  while (absl::Now() < end) {
    auto guard = (*client)->Lock(kFencedResource, ttl, absl::Seconds(2));
    if (!guard.ok()) continue;
    const int64_t fence = guard->lease().fence;
    // With fencing the read goes through the store too: it records this
    // holder's fence, so an older holder that has read but not yet written
    // is refused from now on (a fenced write alone would accept its write
    // while this holder has read but not written, and this holder's write
    // would then overwrite it).
    const std::string read_sql = "SELECT value FROM counter WHERE id = 1";
    absl::StatusOr<fenced::PgResult> read = fencing && fence_reads
                                                ? (*store)->Write(kFencedResource, fence, read_sql)
                                                : (*store)->Exec(read_sql);
    int64_t value = 0;
    if (fenced::IsStaleFence(read.status())) {
      slots[kFencedStaleSlot + id].fetch_add(1);
      continue;
    }
    if (!read.ok() || read->rows.empty() || !read->rows[0][0] ||
        !absl::SimpleAtoi(*read->rows[0][0], &value)) {
      slots[kFencedErrorSlot + id].fetch_add(1);
      continue;
    }
    // Between the read and the write: the nemesis may pause us here, past
    // the lease's TTL. A few ms of "work" give it the chance.
    slots[id].store(1);
    absl::SleepFor(absl::Milliseconds(3));
    const std::vector<fenced::PgParam> params = {absl::StrCat(value + 1), absl::StrCat(id),
                                                 absl::StrCat(fence)};
    absl::StatusOr<fenced::PgResult> w = fencing
                                             ? (*store)->Write(kFencedResource, fence, write_sql,
                                                               params)
                                             : (*store)->Exec(write_sql, params);
    slots[id].store(0);
    if (w.ok()) {
      slots[kFencedAppliedSlot + id].fetch_add(1);
    } else if (fenced::IsStaleFence(w.status())) {
      slots[kFencedStaleSlot + id].fetch_add(1);
    } else {
      slots[kFencedErrorSlot + id].fetch_add(1);
      fprintf(stderr, "worker %d: write: %s\n", id, w.status().ToString().c_str());
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
