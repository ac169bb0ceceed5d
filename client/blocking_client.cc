#include "dlock/client/blocking_client.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/cli/redis_url.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/transport/mutex.h"
#include "dlock/transport/uv/hiredis_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"
#include "dlock/watchdog/renewing_blocking_lock.h"

namespace dlock {
namespace {

// Runs `fn` on the loop thread and waits for it. False if the thread no
// longer accepts work (then `fn` did not run).
bool RunOnLoop(UvLoopThread& thread, absl::AnyInvocable<void() &&> fn) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool posted = thread.Post([&]() {
    std::move(fn)();
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  });
  if (!posted) return false;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return true;
}

// "name: message", unless the message already names the server.
std::string Named(const std::string& name, absl::string_view message) {
  if (absl::StrContains(message, name)) return std::string(message);
  return absl::StrCat(name, ": ", message);
}

}  // namespace

// Shared by the loop-thread callbacks of one Connect and the waiting caller.
struct ConnectWait {
  Mutex mu;
  CondVar cv;
  bool decided ABSL_GUARDED_BY(mu) = false;
  absl::Status result ABSL_GUARDED_BY(mu);
  // Loop thread only.
  int ok = 0;
  int failed = 0;
  std::vector<std::string> errors;

  void Decide(absl::Status status) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    if (decided) return;
    decided = true;
    result = std::move(status);
    cv.SignalAll();
  }
};

BlockingClient::BlockingClient(BlockingClientOptions options)
    : options_(std::move(options)), thread_(std::make_unique<UvLoopThread>()) {}

absl::StatusOr<std::unique_ptr<BlockingClient>> BlockingClient::Connect(
    BlockingClientOptions options) {
  if (options.redis_urls.empty()) {
    return absl::InvalidArgumentError("BlockingClient: no Redis URL given");
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: connect_timeout must be positive");
  }
  if (options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: command_timeout must be positive");
  }
  if (options.reentrant && options.redis_urls.size() > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: reentrant locks need a single server (RedLock is not reentrant)");
  }
  std::vector<HiredisTransportOptions> servers;
  std::vector<std::string> names;
  for (size_t i = 0; i < options.redis_urls.size(); ++i) {
    absl::StatusOr<cli::RedisUrl> url = cli::ParseRedisUrl(options.redis_urls[i]);
    if (!url.ok()) {
      // ParseRedisUrl's message never repeats a password.
      return absl::InvalidArgumentError(absl::StrCat(
          "BlockingClient: redis_urls[", i, "]: ", url.status().message()));
    }
    HiredisTransportOptions t;
    if (url->kind == cli::RedisUrl::Kind::kUnix) {
      t.unix_socket = url->path;
    } else {
      t.host = url->host;
      t.port = url->port;
    }
    t.username = url->user;
    t.password = url->password;
    t.db = url->db;
    t.connect_timeout = options.connect_timeout;
    servers.push_back(std::move(t));
    names.push_back(url->Display());
  }
  std::unique_ptr<BlockingClient> client(new BlockingClient(std::move(options)));
  absl::Status started = client->Start(servers, names);
  if (!started.ok()) return started;  // ~BlockingClient tears down
  return client;
}

absl::Status BlockingClient::Start(const std::vector<HiredisTransportOptions>& servers,
                                   const std::vector<std::string>& names) {
  const int n = static_cast<int>(servers.size());
  const int quorum = n / 2 + 1;
  auto wait = std::make_shared<ConnectWait>();
  absl::Status created;
  bool posted = RunOnLoop(*thread_, [&]() {
    for (const HiredisTransportOptions& o : servers) {
      absl::StatusOr<std::unique_ptr<HiredisTransport>> t =
          HiredisTransport::Create(thread_->uv_loop(), o);
      if (!t.ok()) {
        created = absl::InvalidArgumentError(
            absl::StrCat("BlockingClient: ", names[transports_.size()], ": ",
                         t.status().message()));
        return;
      }
      transports_.push_back(*std::move(t));
    }
    for (int i = 0; i < n; ++i) {
      std::string name = names[i];
      absl::Status s = transports_[i]->Connect([wait, name, n, quorum](absl::Status s) {
        if (s.ok()) {
          if (++wait->ok >= quorum) wait->Decide(absl::OkStatus());
          return;
        }
        wait->errors.push_back(Named(name, s.message()));
        if (++wait->failed > n - quorum) {
          wait->Decide(absl::UnavailableError(absl::StrCat(
              n == 1 ? "cannot connect to Redis: "
                     : absl::StrCat("no quorum of ", quorum, " of ", n,
                                    " Redis servers reachable: "),
              absl::StrJoin(wait->errors, "; "))));
        }
      });
      if (!s.ok()) wait->Decide(s);
    }
    // The bound, in case an attempt outlives connect_timeout (e.g. a slow
    // name lookup). Dropped without running if the loop stops first.
    thread_->loop()->RunAfter(options_.connect_timeout, [wait, n, quorum, names]() {
      std::vector<std::string> errors = wait->errors;
      if (errors.empty()) errors.push_back(absl::StrJoin(names, ", "));
      wait->Decide(absl::UnavailableError(absl::StrCat(
          n == 1 ? "cannot connect to Redis within the connect timeout: "
                 : absl::StrCat("no quorum of ", quorum, " of ", n,
                                " Redis servers within the connect timeout: "),
          absl::StrJoin(errors, "; "))));
    });
  });
  if (!posted) return absl::CancelledError("BlockingClient: loop thread stopped");
  if (!created.ok()) return created;
  {
    MutexLock lock(&wait->mu);
    while (!wait->decided) wait->cv.Wait(&wait->mu);
    if (!wait->result.ok()) return wait->result;
  }

  absl::Status built;
  RunOnLoop(*thread_, [&]() {
    EventLoop* loop = thread_->loop();
    if (n == 1) {
      if (options_.reentrant) {
        ReentrantLockOptions o;
        o.key_prefix = options_.key_prefix;
        o.command_timeout = options_.command_timeout;
        o.observer = options_.observer;
        inner_ = std::make_unique<ReentrantLock>(loop, transports_[0].get(), o);
      } else {
        SimpleLockOptions o;
        o.key_prefix = options_.key_prefix;
        o.command_timeout = options_.command_timeout;
        o.observer = options_.observer;
        inner_ = std::make_unique<SimpleLock>(loop, transports_[0].get(), o);
      }
    } else {
      RedLockOptions o;
      o.keys.prefix = options_.key_prefix;
      o.retry_count = 0;  // one voting round per attempt: RetryLock waits
      o.server_names = names;
      o.observer = options_.observer;
      std::vector<Transport*> ts;
      for (auto& t : transports_) ts.push_back(t.get());
      absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(loop, ts, o);
      if (!redlock.ok()) {
        built = redlock.status();
        return;
      }
      inner_ = *std::move(redlock);
    }
    RetryLockOptions r;
    r.key_prefix = options_.key_prefix;
    r.observer = options_.observer;
    // Release notifications come from the first server (every dlock release
    // publishes on each server it releases); the backoff covers the rest.
    retry_ = std::make_unique<RetryLock>(loop, inner_.get(), transports_[0].get(), r);
  });
  if (!built.ok()) return built;
  if (options_.auto_renew) {
    RenewingBlockingLockOptions r;
    r.watchdog.observer = options_.observer;
    facade_ = std::make_unique<RenewingBlockingLock>(thread_.get(), retry_.get(), std::move(r));
  } else {
    facade_ = std::make_unique<BlockingLock>(thread_.get(), retry_.get());
  }
  return absl::OkStatus();
}

namespace {

// Loop thread: calls `done` once `t` has no command waiting for a reply
// (cleanups such as the release of a cancelled attempt's token are answered)
// or at `deadline`, whichever comes first. Each PING goes behind everything
// sent before it on the connection, so its reply comes after theirs.
void WhenDrained(HiredisTransport* t, EventLoop* loop, absl::Time deadline,
                 std::function<void()> done) {
  const absl::Duration left = deadline - loop->Now();
  if (t->pending_commands() == 0 || left <= absl::ZeroDuration()) {
    done();
    return;
  }
  absl::Status s = t->Send({"PING"}, left, [t, loop, deadline, done](absl::StatusOr<Reply>) {
    WhenDrained(t, loop, deadline, done);
  });
  if (!s.ok()) done();
}

}  // namespace

BlockingClient::~BlockingClient() {
  // 1. The facade: calls that begin from now on get kCancelled; acquires in
  //    flight are cancelled (their callers get kCancelled); leases still
  //    held by guards are released (answered before it returns); every call
  //    that had begun has returned. The watchdog is gone.
  if (facade_ != nullptr) facade_->Shutdown();
  // 2. Policies (they stop their timers and background cleanups), then let
  //    the connections answer what is still in flight (bounded by
  //    command_timeout), then close them all before destroying any, so a
  //    callback that Close() runs never meets a destroyed transport.
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  auto close_all = [this, &mu, &cv, &closed] {
    for (auto& t : transports_) t->Close();
    transports_.clear();
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    cv.notify_all();
  };
  const bool posted = thread_->Post([this, &close_all] {
    retry_.reset();
    inner_.reset();
    EventLoop* loop = thread_->loop();
    // Started: give what is in flight its answer. Never started (Connect
    // failed): close at once.
    const absl::Time deadline =
        loop->Now() + (facade_ != nullptr ? options_.command_timeout : absl::ZeroDuration());
    auto left = std::make_shared<size_t>(transports_.size());
    if (*left == 0) {
      close_all();
      return;
    }
    // Copies of the raw pointers: close_all clears transports_.
    std::vector<HiredisTransport*> ts;
    for (auto& t : transports_) ts.push_back(t.get());
    for (HiredisTransport* t : ts) {
      WhenDrained(t, loop, deadline, [left, &close_all] {
        if (--*left == 0) close_all();
      });
    }
  });
  if (posted) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return closed; });
  }
  // Runs what is still posted, lets libuv deliver the close callbacks and
  // joins the thread.
  thread_.reset();
  // Inert since Shutdown: touches neither the loop nor the lock. Guards
  // that outlive it only keep its gate.
  facade_.reset();
}

absl::StatusOr<LockGuard> BlockingClient::TryLock(absl::string_view resource,
                                                  absl::Duration ttl) {
  return facade_->TryLock(resource, ttl);
}

absl::StatusOr<LockGuard> BlockingClient::Lock(absl::string_view resource,
                                               absl::Duration ttl, absl::Duration wait) {
  return facade_->Lock(resource, ttl, wait);
}

}  // namespace dlock
