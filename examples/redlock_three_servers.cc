// RedLock across three independent servers, one of which is killed: the
// lock is granted by a quorum (2 of 3), so it keeps working with one server
// down -- and refuses (no quorum) when a second one goes. Per-server votes
// are printed through a LockObserver.
//
//   bazel run //examples:redlock_three_servers
//   (with --redis, give three servers; the example then cannot kill them and
//    only shows the acquire/release with all three up)
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dlock/examples/support/example_env.h"
#include "dlock/transport/transport.h"
#include "dlock/lock/observer.h"
#include "dlock/redlock/redlock.h"

ABSL_FLAG(bool, fake, false,
          "run on in-memory fake servers in virtual time (*_fake binaries only)");
ABSL_FLAG(std::vector<std::string>, redis, {},
          "three Redis servers (redis://host:port,...); default: start three");

namespace dlock {
namespace examples {
namespace {

int Main() {
  absl::StatusOr<std::unique_ptr<ExampleEnv>> env =
      ExampleEnv::Create(absl::GetFlag(FLAGS_redis), 3, absl::GetFlag(FLAGS_fake));
  if (!env.ok()) {
    Say(env.status().ToString());
    return 1;
  }
  ExampleEnv& e = **env;
  bool ok = true;
  {
    TextLockObserver observer([](absl::string_view line) {
      if (absl::StartsWith(line, "vote acquire")) Say(absl::StrCat("  ", line));
    });
    std::vector<std::unique_ptr<Transport>> conns;
    std::vector<Transport*> servers;
    RedLockOptions o;
    for (size_t i = 0; i < 3; ++i) {
      conns.push_back(e.Connect(i));
      servers.push_back(conns.back().get());
      o.server_names.push_back(e.address(i));
    }
    o.observer = &observer;
    o.retry_count = 0;
    absl::StatusOr<std::unique_ptr<RedLock>> lock = RedLock::Create(e.loop(), servers, o);
    if (!lock.ok()) {
      Say(lock.status().ToString());
      return 1;
    }
    auto acquire_release = [&](const std::string& label) -> absl::Status {
      Say(absl::StrCat(label, ": acquiring \"invoice-run\" (quorum ", (*lock)->quorum(), ")"));
      bool done = false;
      absl::StatusOr<Lease> result = absl::UnknownError("pending");
      AcquireOptions ao;
      ao.ttl = absl::Seconds(10);
      auto h = (*lock)->Acquire("invoice-run", ao, [&](absl::StatusOr<Lease> l) {
        result = std::move(l);
        done = true;
      });
      if (!h.ok()) return h.status();
      e.RunUntil([&] { return done; });
      if (!result.ok()) {
        Say(absl::StrCat(label, ": not granted: ", result.status().ToString()));
        return result.status();
      }
      Say(absl::StrCat(label, ": granted, fence ", result->fence, ", valid for ",
                       absl::FormatDuration(result->deadline - e.loop()->Now())));
      bool released = false;
      (*lock)->Release(*result, [&](absl::Status s) {
        Say(absl::StrCat(label, ": released (", s.ok() ? "OK" : s.ToString(), ")"));
        released = true;
      }).IgnoreError();
      e.RunUntil([&] { return released; });
      return absl::OkStatus();
    };

    ok = acquire_release("all three up").ok();
    absl::Status killed = e.KillServer(0);
    if (!killed.ok()) {
      Say(absl::StrCat("skipping the kill part: ", killed.message()));
    } else {
      Say(absl::StrCat("killed the server on ", e.address(0)));
      ok = acquire_release("one server down").ok() && ok;
      e.KillServer(1).IgnoreError();
      Say(absl::StrCat("killed the server on ", e.address(1)));
      absl::Status s = acquire_release("two servers down");
      ok = ok && absl::IsUnavailable(s);
      if (absl::IsUnavailable(s)) Say("refused as it must be: no quorum of 2");
    }
    lock->reset();
    conns.clear();
  }
  Say(ok ? "RedLock behaved as expected" : "UNEXPECTED RESULT");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace examples
}  // namespace dlock

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dlock::examples::Main();
}
