// Reentrant lock (the design document's nested `with ReentrantLock(...)`):
// a transfer task holds "account:<id>" and calls a helper, debit(), that
// takes the same lock again. With ReentrantLock the task re-enters (same
// client id and task id: the owner count goes 1 -> 2 -> 1 -> 0), the fence
// stays the same, and another client stays locked out until the OUTER hold
// is released. With --no_reentrancy the task uses a SimpleLock instead, and
// debit() cannot take the lock its own task already holds (kAborted: with
// a wait it would deadlock until the TTL): the scenario fails (that variant
// must exit 1; examples/BUILD checks it).
//
//   bazel run //examples:reentrant_nested [-- --redis=redis://127.0.0.1:6379]
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/transport/transport.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "Redis server (redis://host:port); default: start a private one");
ABSL_FLAG(bool, no_reentrancy, false,
          "the nested call uses a non-reentrant SimpleLock (must fail)");

namespace dlock {
namespace examples {
namespace {

// Runs one acquire to completion on the example's loop.
absl::StatusOr<Lease> AcquireNow(ExampleEnv& e, Lock& lock, const std::string& resource,
                                 const std::string& task) {
  AcquireOptions o;
  o.ttl = absl::Seconds(10);
  o.task_id = task;
  bool done = false;
  absl::StatusOr<Lease> out = absl::UnknownError("no reply");
  absl::StatusOr<AcquireHandle> h = lock.Acquire(resource, o, [&](absl::StatusOr<Lease> l) {
    out = std::move(l);
    done = true;
  });
  if (!h.ok()) return h.status();
  e.RunUntil([&] { return done; }, absl::Seconds(10));
  return out;
}

absl::Status ReleaseNow(ExampleEnv& e, Lock& lock, const Lease& lease) {
  bool done = false;
  absl::Status out = absl::UnknownError("no reply");
  absl::Status s = lock.Release(lease, [&](absl::Status r) {
    out = std::move(r);
    done = true;
  });
  if (!s.ok()) return s;
  e.RunUntil([&] { return done; }, absl::Seconds(10));
  return out;
}

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 1, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  absl::BitGen rng;
  const std::string resource = absl::StrCat("account:", absl::Uniform<uint64_t>(rng));
  bool ok = true;
  {
    std::unique_ptr<Transport> conn = e.Connect(0);
    std::unique_ptr<Transport> other_conn = e.Connect(0);
    ReentrantLockOptions mine;
    mine.client_id = "payments-1";
    ReentrantLock lock(e.loop(), conn.get(), mine);
    SimpleLock plain(e.loop(), conn.get());
    ReentrantLockOptions theirs;
    theirs.client_id = "payments-2";
    ReentrantLock other(e.loop(), other_conn.get(), theirs);
    // --no_reentrancy: both holds use a SimpleLock, as code unaware of
    // reentrancy would.
    Lock& task_lock = absl::GetFlag(FLAGS_no_reentrancy) ? static_cast<Lock&>(plain)
                                                         : static_cast<Lock&>(lock);

    // transfer(): the outer hold.
    absl::StatusOr<Lease> outer = AcquireNow(e, task_lock, resource, "transfer");
    if (!outer.ok()) {
      Say(absl::StrCat("transfer: could not lock ", resource, ": ", outer.status().ToString()));
      return 1;
    }
    Say(absl::StrCat("transfer: holds ", resource, " (fence ", outer->fence, ")"));
    // debit(), called by transfer(), locks the same account again.
    absl::StatusOr<Lease> inner = AcquireNow(e, task_lock, resource, "transfer");
    if (!inner.ok()) {
      Say(absl::StrCat("  debit: could not re-enter ", resource, ": ",
                       inner.status().ToString()));
      ok = false;
    } else {
      Say(absl::StrCat("  debit: re-entered ", resource, " (fence ", inner->fence, ")"));
      if (inner->fence != outer->fence) ok = false;
      absl::Status s = ReleaseNow(e, task_lock, *inner);
      Say(absl::StrCat("  debit: released its hold: ", s.ToString()));
      if (!s.ok()) ok = false;
    }
    // Back in transfer(): still held, so another client is locked out.
    absl::StatusOr<Lease> intruder = AcquireNow(e, other, resource, "audit");
    Say(absl::StrCat("audit (another client) while transfer still holds it: ",
                     intruder.ok() ? "GOT IT" : intruder.status().ToString()));
    if (intruder.ok()) {
      ok = false;
      (void)ReleaseNow(e, other, *intruder);
    }
    absl::Status s = ReleaseNow(e, task_lock, *outer);
    Say(absl::StrCat("transfer: released: ", s.ToString()));
    if (!s.ok()) ok = false;
    // Now the account is free for the other client.
    absl::StatusOr<Lease> after = AcquireNow(e, other, resource, "audit");
    Say(absl::StrCat("audit after transfer released: ",
                     after.ok() ? "got it" : after.status().ToString()));
    if (!after.ok()) {
      ok = false;
    } else if (!ReleaseNow(e, other, *after).ok()) {
      ok = false;
    }
  }
  Say(ok ? "the nested call re-entered the task's own lock; others waited for the outer release"
         : "UNEXPECTED: the nested scenario did not behave");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
