// Read-write lock: a configuration that readers never see half-done. The
// configuration is two Redis keys that must agree (cfg:<id>:a and
// cfg:<id>:b hold the same version). Readers (each its own "process":
// connection, ReadWriteLock, RetryLock) read both keys under a read lock;
// the writer reloads it -- a, a pause, b -- under the write lock.
//
//   t=0    readers R1 and R2 take the read lock (they overlap), GET a ...
//   t=10   writer W asks for the write lock: busy (readers), so it marks
//          itself waiting
//   t=20   reader R3 arrives: refused while W waits (no writer starvation)
//   t=40   R1, R2 GET b and release; W is woken, writes a, pauses, writes b,
//          releases; R3 then gets in and reads the NEW version, whole.
//
// It checks: every read is consistent, R1 and R2 held at once, R3 read
// after W's reload. With --unlocked nobody locks: R1 reads a before the
// reload and b after it -- a half-done configuration -- and the example
// must exit 1 (examples/BUILD checks that variant fails).
//
//   bazel run //examples:config_reload [-- --redis=redis://127.0.0.1:6379]
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/transport/transport.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(bool, unlocked, false, "nobody takes the lock (must fail)");

namespace dlock {
namespace examples {
namespace {

constexpr absl::Duration kCommandTimeout = absl::Seconds(2);

// One client process: a connection, its read-write lock and waiting locks.
struct Client {
  Client(EventLoop* loop, std::unique_ptr<Transport> c)
      : conn(std::move(c)),
        rw(loop, conn.get()),
        readers(loop, &rw.reader()),
        writers(loop, &rw.writer()) {}
  std::unique_ptr<Transport> conn;
  ReadWriteLock rw;
  RetryLock readers;
  RetryLock writers;
};

struct Scenario {
  EventLoop* loop;
  std::string a, b, resource;
  bool unlocked = false;
  int holding_readers = 0;
  int max_readers = 0;
  bool failed = false;
  bool reload_done = false;
  int finished = 0;

  void Fail(const std::string& why) {
    Say(absl::StrCat("  ", why));
    failed = true;
  }

  // Takes `lock` (or nothing when unlocked), runs `body(done)`, releases.
  void Locked(Lock& lock, const std::string& who,
              std::function<void(std::function<void()>)> body) {
    if (unlocked) {
      body([this] { ++finished; });
      return;
    }
    AcquireOptions o;
    o.ttl = absl::Seconds(10);
    o.wait = absl::Seconds(10);
    absl::StatusOr<AcquireHandle> h =
        lock.Acquire(resource, o, [this, &lock, who, body](absl::StatusOr<Lease> lease) {
          if (!lease.ok()) {
            Fail(absl::StrCat(who, ": no lock: ", lease.status().ToString()));
            ++finished;
            return;
          }
          Say(absl::StrCat(who, ": locked (fence ", lease->fence, ")"));
          body([this, &lock, who, lease = *lease] {
            (void)lock.Release(lease, [this, who](absl::Status s) {
              Say(absl::StrCat(who, ": released (", s.ToString(), ")"));
              ++finished;
            });
          });
        });
    if (!h.ok()) {
      Fail(h.status().ToString());
      ++finished;
    }
  }

  void Get(Transport* t, const std::string& key, std::function<void(std::string)> cb) {
    (void)t->Send({"GET", key}, kCommandTimeout, [cb](absl::StatusOr<Reply> r) {
      cb(r.ok() && r->is_string() ? r->str : "?");
    });
  }
  void Set(Transport* t, const std::string& key, const std::string& v,
           std::function<void()> cb) {
    (void)t->Send({"SET", key, v}, kCommandTimeout, [cb](absl::StatusOr<Reply>) { cb(); });
  }

  // A reader: GET a, wait `gap`, GET b, compare.
  void Read(Client& c, const std::string& who, absl::Duration gap, bool expect_new) {
    Locked(c.readers, who, [this, &c, who, gap, expect_new](std::function<void()> done) {
      max_readers = std::max(max_readers, ++holding_readers);
      Get(c.conn.get(), a, [this, &c, who, gap, expect_new, done](std::string va) {
        loop->RunAfter(gap, [this, &c, who, va, expect_new, done] {
          Get(c.conn.get(), b, [this, who, va, expect_new, done](std::string vb) {
            --holding_readers;
            Say(absl::StrCat(who, ": read a=", va, " b=", vb));
            if (va != vb) Fail(absl::StrCat(who, ": HALF-DONE configuration"));
            if (expect_new && (va != "v2" || !reload_done)) {
              Fail(absl::StrCat(who, ": got in before the waiting writer"));
            }
            done();
          });
        });
      });
    });
  }

  void Reload(Client& c) {
    Locked(c.writers, "W", [this, &c](std::function<void()> done) {
      if (holding_readers > 0) Fail("W: writing while readers hold");
      Set(c.conn.get(), a, "v2", [this, &c, done] {
        loop->RunAfter(absl::Milliseconds(20), [this, &c, done] {
          Set(c.conn.get(), b, "v2", [this, done] {
            reload_done = true;
            Say("W: reloaded the configuration to v2");
            done();
          });
        });
      });
    });
  }
};

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  absl::BitGen rng;
  const std::string id = absl::StrCat(absl::Uniform<uint64_t>(rng));
  Scenario s{e.loop(), absl::StrCat("cfg:", id, ":a"), absl::StrCat("cfg:", id, ":b"),
             absl::StrCat("config:", id)};
  s.unlocked = absl::GetFlag(FLAGS_unlocked);
  {
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 4; ++i) {
      std::unique_ptr<Transport> conn = e.Connect(0);
      if (conn == nullptr) return 1;
      clients.push_back(std::make_unique<Client>(e.loop(), std::move(conn)));
    }
    bool seeded = false;
    s.Set(clients[0]->conn.get(), s.a, "v1", [&] {
      s.Set(clients[0]->conn.get(), s.b, "v1", [&] { seeded = true; });
    });
    e.RunUntil([&] { return seeded; });
    s.Read(*clients[0], "R1", absl::Milliseconds(40), false);
    s.Read(*clients[1], "R2", absl::Milliseconds(40), false);
    e.loop()->RunAfter(absl::Milliseconds(10), [&] { s.Reload(*clients[2]); });
    e.loop()->RunAfter(absl::Milliseconds(20),
                       [&] { s.Read(*clients[3], "R3", absl::Milliseconds(1), true); });
    if (!e.RunUntil([&] { return s.finished == 4; }, absl::Seconds(20))) {
      s.Fail("the scenario did not finish");
    }
    if (!s.unlocked && s.max_readers < 2) s.Fail("R1 and R2 never held at once");
  }
  Say(s.failed ? "UNEXPECTED: a reader saw a half-done configuration or the order broke"
               : "readers shared the lock and never saw a half-done configuration; the "
                 "waiting writer went before the late reader");
  return s.failed ? 1 : 0;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
