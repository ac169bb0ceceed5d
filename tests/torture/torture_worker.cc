// torture_worker: one worker process of the torture run (see
// torture_driver.h). Loops: take the lock (RetryLock over SimpleLock on one
// server, RedLock on several), read-modify-write the fenced register and its
// unfenced twin on the store server, release. Every critical section is
// appended to --log as
//   cs <fence> <start_ns> <end_ns> <outcome> <token>
// and every release, when its callback ran, as
//   rel <token> <sent_ns> <done_ns> <status code>
// (times on CLOCK_MONOTONIC, shared by all processes of the machine), and
// its in/out state is published in slot --id of the shared page --shm, so
// the nemesis can pause a worker that holds the lock. SIGTERM: finish the
// current critical section, release, append `done <acquired> <errors>`,
// exit 0.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/semaphore.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/tests/torture/torture_client.h"
#include "dlock/tests/torture/worker_processes.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_transport.h"
#include "dlock/transport/uv/uv_event_loop.h"

ABSL_FLAG(int, id, 0, "worker index (slot in --shm)");
ABSL_FLAG(std::string, lock_ports, "", "comma-separated lock server ports");
ABSL_FLAG(std::string, lock_addrs, "",
          "instead of --lock_ports: comma-separated host:port of each lock server (the "
          "network scenarios route each worker through its own proxy or address)");
ABSL_FLAG(int, command_timeout_ms, 0,
          "one server: SimpleLock's command_timeout; RedLock: server_timeout (0: default)");
ABSL_FLAG(int, release_timeout_ms, 0, "RedLock release_timeout (0: default)");
ABSL_FLAG(int, drain_ms, 0,
          "after SIGTERM's last release, keep the loop running this long before closing, so "
          "a release still in flight on a slow server is not cut off");
ABSL_FLAG(bool, gate, false,
          "hold acquisitions while the driver's gate slot in --shm is set (ghost-key audits)");
ABSL_FLAG(std::string, lock_url, "",
          "instead of --lock_ports: one lock server URL (e.g. redis-sentinel://...)");
ABSL_FLAG(int, min_replicas, 0, "one server: SimpleLock's replica acknowledgement");
ABSL_FLAG(int, store_port, 0, "store server port");
ABSL_FLAG(int, ttl_ms, 500, "lease ttl");
ABSL_FLAG(int, hold_ms, 2, "time between the reads and the writes");
ABSL_FLAG(int, wait_ms, 2000, "how long one Acquire may wait");
ABSL_FLAG(int, redlock_max_ttl_ms, 2000, "RedLock max_ttl (restart quarantine)");
ABSL_FLAG(bool, redlock_delayed_restart, true, "RedLock delayed-restart rule");
ABSL_FLAG(int, single_restart_window_ms, 0,
          "single server: SimpleLock's restart window (0: off, the default)");
ABSL_FLAG(bool, check_deadline, true, "check the lease deadline before writing");
ABSL_FLAG(std::string, primitive, "",
          "one server: \"\" the plain lock, \"reader\" / \"writer\" a ReadWriteLock view, "
          "\"semaphore\" a Semaphore of --permits");
ABSL_FLAG(int, permits, 2, "--primitive=semaphore: permits");
ABSL_FLAG(std::string, log, "", "record file (appended)");
ABSL_FLAG(std::string, shm, "", "shared page of in-critical-section flags");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const int id = absl::GetFlag(FLAGS_id);
  std::vector<std::pair<std::string, int>> addrs;
  for (absl::string_view a : absl::StrSplit(absl::GetFlag(FLAGS_lock_addrs), ',',
                                            absl::SkipEmpty())) {
    std::pair<std::string, std::string> hp = absl::StrSplit(a, absl::MaxSplits(':', 1));
    int port;
    if (hp.first.empty() || !absl::SimpleAtoi(hp.second, &port)) {
      std::fprintf(stderr, "bad --lock_addrs\n");
      return 2;
    }
    addrs.emplace_back(hp.first, port);
  }
  std::vector<int> ports;
  const std::string lock_url = absl::GetFlag(FLAGS_lock_url);
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_lock_ports), ',',
                                            absl::SkipEmpty())) {
    int port;
    if (!absl::SimpleAtoi(p, &port)) {
      std::fprintf(stderr, "bad --lock_ports\n");
      return 2;
    }
    ports.push_back(port);
    addrs.emplace_back("127.0.0.1", port);
  }
  int log_fd = open(absl::GetFlag(FLAGS_log).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                    0600);
  if (log_fd < 0) {
    std::perror("open --log");
    return 2;
  }
  std::atomic<int32_t>* slots = nullptr;
  int shm_fd = open(absl::GetFlag(FLAGS_shm).c_str(), O_RDWR | O_CLOEXEC);
  if (shm_fd >= 0) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    close(shm_fd);
    if (p != MAP_FAILED) slots = static_cast<std::atomic<int32_t>*>(p);
  }
  if (slots == nullptr || id < 0 || id >= dlock::torture::kWrittenSlotBase) {
    std::fprintf(stderr, "bad --shm or --id\n");
    return 2;
  }

  uv_loop_t uv;
  uv_loop_init(&uv);
  auto loop = std::make_unique<dlock::UvEventLoop>(&uv);
  std::vector<std::unique_ptr<dlock::Transport>> lock_transports;
  std::vector<dlock::Transport*> raw;
  if (!lock_url.empty()) {
    auto url = dlock::ParseRedisUrl(lock_url);
    if (!url.ok()) {
      std::fprintf(stderr, "%s\n", url.status().ToString().c_str());
      return 2;
    }
    dlock::UvTransportOptions t = dlock::TransportOptionsForUrl(*url);
    t.connection.reconnect_backoff_min = absl::Milliseconds(20);
    t.connection.reconnect_backoff_max = absl::Milliseconds(200);
    auto tr = dlock::UvTransport::Create(&uv, t);
    if (!tr.ok()) {
      std::fprintf(stderr, "%s\n", tr.status().ToString().c_str());
      return 2;
    }
    raw.push_back(tr->get());
    lock_transports.push_back(*std::move(tr));
  }
  for (const auto& [host, port] : addrs) {
    dlock::HiredisTransportOptions t;
    t.host = host;
    t.port = port;
    t.reconnect_backoff_min = absl::Milliseconds(20);
    t.reconnect_backoff_max = absl::Milliseconds(200);
    auto tr = dlock::HiredisTransport::Create(&uv, t);
    if (!tr.ok()) {
      std::fprintf(stderr, "%s\n", tr.status().ToString().c_str());
      return 2;
    }
    raw.push_back(tr->get());
    lock_transports.push_back(*std::move(tr));
  }
  dlock::HiredisTransportOptions so;
  so.port = absl::GetFlag(FLAGS_store_port);
  auto store = dlock::HiredisTransport::Create(&uv, so);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 2;
  }

  std::unique_ptr<dlock::SimpleLock> simple;
  std::unique_ptr<dlock::ReadWriteLock> rw;
  std::unique_ptr<dlock::Semaphore> semaphore;
  std::unique_ptr<dlock::RetryLock> retry;
  const std::string primitive = absl::GetFlag(FLAGS_primitive);
  std::unique_ptr<dlock::RedLock> redlock;
  dlock::Lock* lock = nullptr;
  if (raw.size() == 1) {
    dlock::SimpleLockOptions so;
    so.replica_ack = dlock::ReplicaAck(absl::GetFlag(FLAGS_min_replicas));
    so.restart_window = absl::Milliseconds(absl::GetFlag(FLAGS_single_restart_window_ms));
    if (absl::GetFlag(FLAGS_command_timeout_ms) > 0) {
      so.command_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_command_timeout_ms));
    }
    dlock::Lock* inner = nullptr;
    if (primitive.empty()) {
      simple = std::make_unique<dlock::SimpleLock>(loop.get(), raw[0], so);
      inner = simple.get();
    } else if (primitive == "reader" || primitive == "writer") {
      dlock::ReadWriteLockOptions rwo;
      rwo.restart_window = so.restart_window;
      rw = std::make_unique<dlock::ReadWriteLock>(loop.get(), raw[0], rwo);
      inner = primitive == "reader" ? &rw->reader() : &rw->writer();
    } else if (primitive == "semaphore") {
      dlock::SemaphoreOptions semo;
      semo.permits = absl::GetFlag(FLAGS_permits);
      semo.restart_window = so.restart_window;
      semaphore = std::make_unique<dlock::Semaphore>(loop.get(), raw[0], semo);
      inner = semaphore.get();
    } else {
      std::fprintf(stderr, "bad --primitive\n");
      return 2;
    }
    dlock::RetryLockOptions ro;
    ro.initial_backoff = absl::Milliseconds(10);
    ro.max_backoff = absl::Milliseconds(100);
    retry = std::make_unique<dlock::RetryLock>(loop.get(), inner, ro);
    lock = retry.get();
  } else {
    dlock::RedLockOptions ro;
    ro.max_ttl = absl::Milliseconds(absl::GetFlag(FLAGS_redlock_max_ttl_ms));
    ro.delayed_restart = absl::GetFlag(FLAGS_redlock_delayed_restart);
    ro.retry_delay = absl::Milliseconds(20);
    ro.retry_jitter = absl::Milliseconds(10);
    if (absl::GetFlag(FLAGS_command_timeout_ms) > 0) {
      ro.server_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_command_timeout_ms));
    }
    if (absl::GetFlag(FLAGS_release_timeout_ms) > 0) {
      ro.release_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_release_timeout_ms));
    }
    auto rl = dlock::RedLock::Create(loop.get(), raw, ro);
    if (!rl.ok()) {
      std::fprintf(stderr, "%s\n", rl.status().ToString().c_str());
      return 2;
    }
    redlock = *std::move(rl);
    lock = redlock.get();
  }

  dlock::torture::ClientOptions co;
  co.worker = id;
  co.acquire.ttl = absl::Milliseconds(absl::GetFlag(FLAGS_ttl_ms));
  co.acquire.wait = absl::Milliseconds(absl::GetFlag(FLAGS_wait_ms));
  co.hold = absl::Milliseconds(absl::GetFlag(FLAGS_hold_ms));
  co.check_deadline = absl::GetFlag(FLAGS_check_deadline);
  if (absl::GetFlag(FLAGS_gate)) {
    std::atomic<int32_t>* gate = &slots[dlock::torture::kGateSlot];
    std::atomic<int32_t>* idle = &slots[dlock::torture::kIdleSlotBase + id];
    co.gate = [gate] { return gate->load() != 0; };
    co.on_idle = [idle](bool on) { idle->store(on ? 1 : 0); };
  }
  auto client = std::make_unique<dlock::torture::TortureClient>(
      loop.get(), lock, store->get(), co, dlock::torture::MonotonicNanos,
      [log_fd, written = &slots[dlock::torture::kWrittenSlotBase + id]](
          const dlock::torture::CsRecord& r) {
        if (r.outcome == dlock::torture::CsOutcome::kWritten) written->fetch_add(1);
        dlock::torture::WriteAll(
            log_fd, absl::StrFormat("cs %d %d %d %d %s\n", r.fence, r.start_ns, r.end_ns,
                                    static_cast<int>(r.outcome), r.token));
      },
      [slot = &slots[id]](dlock::torture::TortureClient::Phase p) {
        slot->store(static_cast<int32_t>(p));
      });

  client->set_release_sink([log_fd](const dlock::torture::ReleaseRecord& r) {
    dlock::torture::WriteAll(log_fd, absl::StrFormat("rel %s %d %d %d\n", r.token, r.sent_ns,
                                                     r.done_ns, static_cast<int>(r.code)));
  });

  // SIGTERM: stop after the current critical section, then tear down.
  auto* sig = new uv_signal_t;
  uv_signal_init(&uv, sig);
  struct Ctx {
    dlock::torture::TortureClient* client;
    dlock::EventLoop* loop;
    std::function<void()> teardown;
  };
  Ctx ctx;
  ctx.client = client.get();
  ctx.loop = loop.get();
  ctx.teardown = [&] {
    dlock::torture::WriteAll(
        log_fd, absl::StrFormat("done %d %d\n", client->acquired(), client->acquire_errors()));
    client.reset();
    retry.reset();
    simple.reset();
    rw.reset();
    semaphore.reset();
    redlock.reset();
    for (auto& t : lock_transports) t->Close();
    (*store)->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(sig),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_signal_t*>(h); });
  };
  sig->data = &ctx;
  uv_signal_start(
      sig,
      [](uv_signal_t* h, int) {
        auto* c = static_cast<Ctx*>(h->data);
        uv_signal_stop(h);
        c->client->Stop([c] {
          c->loop->RunAfter(absl::Milliseconds(absl::GetFlag(FLAGS_drain_ms)),
                            [c] { c->teardown(); });
        });
      },
      SIGTERM);
  client->Start();
  uv_run(&uv, UV_RUN_DEFAULT);
  loop.reset();
  lock_transports.clear();
  store->reset();
  uv_run(&uv, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&uv);
  close(log_fd);
  return rc == 0 ? 0 : 3;
}
