#include "dlock/blocking/blocking_client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dlock/blocking/permit_facades.h"
#include "dlock/blocking/post_and_wait.h"
#include "dlock/lock/fair_lock.h"
#include "dlock/lock/read_write_lock.h"
#include "dlock/lock/reentrant_lock.h"
#include "dlock/lock/replica_ack.h"
#include "dlock/lock/retry_lock.h"
#include "dlock/lock/simple_lock.h"
#include "dlock/redlock/redlock.h"
#include "dlock/transport/uv/redis_url.h"
#include "dlock/transport/uv/uv_transport.h"
#include "dlock/transport/uv/uv_loop_thread.h"

namespace dlock {
namespace {

// "name: message", unless the message already names the server.
std::string Named(const std::string& name, absl::string_view message) {
  if (absl::StrContains(message, name)) return std::string(message);
  return absl::StrCat(name, ": ", message);
}

absl::Status CheckFairOptions(const BlockingClientOptions& options, size_t servers) {
  if (!options.fair) return absl::OkStatus();
  if (servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: fair locks need a single server (RedLock has no queue)");
  }
  if (options.reentrant) {
    return absl::InvalidArgumentError("BlockingClient: a lock cannot be both fair and reentrant");
  }
  return absl::OkStatus();
}

absl::Status CheckCommonOptions(const BlockingClientOptions& options, size_t servers) {
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: connect_timeout must be positive");
  }
  if (options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BlockingClient: command_timeout must be positive");
  }
  if (options.reentrant && servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: reentrant locks need a single server (RedLock is not reentrant)");
  }
  absl::Status fair = CheckFairOptions(options, servers);
  if (!fair.ok()) return fair;
  if (options.min_replicas > 0 && servers > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: min_replicas needs a single server (RedLock's servers are "
        "independent, not replicas)");
  }
  ReplicaAckOptions ack;
  ack.min_replicas = options.min_replicas;
  ack.timeout = options.replica_ack_timeout;
  absl::Status s = ValidateReplicaAck(ack);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("BlockingClient: ", s.message()));
  return absl::OkStatus();
}

// Loop thread: the outcome of one connect wait, shared by the transports'
// Connect callbacks and the timeout timer. The first decision wins.
struct ConnectWait {
  explicit ConnectWait(Completion<absl::Status> done) : done(std::move(done)) {}
  Completion<absl::Status> done;
  int ok = 0;
  int failed = 0;
  std::vector<std::string> errors;
};

// Loop thread: what a transport factory handed over must be usable.
absl::Status CheckTransports(const std::vector<std::unique_ptr<Transport>>& transports,
                             const BlockingClientOptions& options) {
  if (transports.empty()) {
    return absl::InvalidArgumentError("BlockingClient: no transport given");
  }
  for (const auto& t : transports) {
    if (t == nullptr) return absl::InvalidArgumentError("BlockingClient: a transport is null");
  }
  if (options.reentrant && transports.size() > 1) {
    return absl::InvalidArgumentError(
        "BlockingClient: reentrant locks need a single server (RedLock is not reentrant)");
  }
  return absl::OkStatus();
}

// Loop thread: connects every transport and calls `done` once: OK when a
// quorum (n/2 + 1; 1 of 1) is connected, kUnavailable naming the servers'
// errors once a quorum can no longer connect or at `timeout`, whichever
// comes first.
void AwaitConnectQuorum(EventLoop* loop, const std::vector<std::unique_ptr<Transport>>& transports,
                        const std::vector<std::string>& names, absl::Duration timeout,
                        Completion<absl::Status> done) {
  const int n = static_cast<int>(transports.size());
  const int quorum = n / 2 + 1;
  auto wait = std::make_shared<ConnectWait>(std::move(done));
  for (int i = 0; i < n; ++i) {
    std::string name = names[i];
    absl::Status s = transports[i]->Connect([wait, name, n, quorum](absl::Status s) {
      if (s.ok()) {
        if (++wait->ok >= quorum) wait->done(absl::OkStatus());
        return;
      }
      wait->errors.push_back(Named(name, s.message()));
      if (++wait->failed > n - quorum) {
        wait->done(absl::UnavailableError(absl::StrCat(
            n == 1 ? "cannot connect to Redis: "
                   : absl::StrCat("no quorum of ", quorum, " of ", n,
                                  " Redis servers reachable: "),
            absl::StrJoin(wait->errors, "; "))));
      }
    });
    if (!s.ok()) wait->done(s);
  }
  // The bound, in case an attempt outlives the timeout (e.g. a slow name
  // lookup). Dropped without running if the loop stops first (then the
  // wait ends with kCancelled).
  loop->RunAfter(timeout, [wait, n, quorum, names]() {
    std::vector<std::string> errors = wait->errors;
    if (errors.empty()) errors.push_back(absl::StrJoin(names, ", "));
    wait->done(absl::UnavailableError(absl::StrCat(
        n == 1 ? "cannot connect to Redis within the connect timeout: "
               : absl::StrCat("no quorum of ", quorum, " of ", n,
                              " Redis servers within the connect timeout: "),
        absl::StrJoin(errors, "; "))));
  });
}

// Loop thread: the policy: FairLock on one server with `fair` (it waits in
// its own queue, nothing goes over it); else the policy under RetryLock:
// SimpleLock, or ReentrantLock, on one server; RedLock (one voting round per
// attempt) over several.
absl::StatusOr<std::unique_ptr<dlock::Lock>> MakeInnerLock(
    EventLoop* loop, const std::vector<std::unique_ptr<Transport>>& transports,
    const std::vector<std::string>& names, const BlockingClientOptions& options) {
  if (transports.size() == 1 && options.fair) {
    FairLockOptions o;
    o.key_prefix = options.key_prefix;
    o.command_timeout = options.command_timeout;
    o.queue_ttl = options.fair_queue_ttl;
    o.observer = options.observer;
    return std::make_unique<FairLock>(loop, transports[0].get(), o);
  }
  if (transports.size() == 1) {
    if (options.reentrant) {
      ReentrantLockOptions o;
      o.key_prefix = options.key_prefix;
      o.command_timeout = options.command_timeout;
      o.observer = options.observer;
      o.replica_ack.min_replicas = options.min_replicas;
      o.replica_ack.timeout = options.replica_ack_timeout;
      return std::make_unique<ReentrantLock>(loop, transports[0].get(), o);
    }
    SimpleLockOptions o;
    o.key_prefix = options.key_prefix;
    o.command_timeout = options.command_timeout;
    o.observer = options.observer;
    o.replica_ack.min_replicas = options.min_replicas;
    o.replica_ack.timeout = options.replica_ack_timeout;
    return std::make_unique<SimpleLock>(loop, transports[0].get(), o);
  }
  RedLockOptions o;
  o.keys.prefix = options.key_prefix;
  o.retry_count = 0;  // one voting round per attempt: RetryLock waits
  o.server_names = names;
  o.observer = options.observer;
  std::vector<Transport*> ts;
  for (auto& t : transports) ts.push_back(t.get());
  absl::StatusOr<std::unique_ptr<RedLock>> redlock = RedLock::Create(loop, ts, o);
  if (!redlock.ok()) return redlock.status();
  return std::unique_ptr<dlock::Lock>(*std::move(redlock));
}

}  // namespace

BlockingClient::BlockingClient(BlockingClientOptions options,
                               std::unique_ptr<UvLoopThread> owned_thread, LoopThread* thread)
    : options_(std::move(options)), owned_thread_(std::move(owned_thread)), thread_(thread) {}

absl::StatusOr<std::unique_ptr<BlockingClient>> BlockingClient::Connect(
    BlockingClientOptions options) {
  if (options.redis_urls.empty()) {
    return absl::InvalidArgumentError("BlockingClient: no Redis URL given");
  }
  absl::Status valid = CheckCommonOptions(options, options.redis_urls.size());
  if (!valid.ok()) return valid;
  std::vector<UvTransportOptions> servers;
  std::vector<std::string> names;
  for (size_t i = 0; i < options.redis_urls.size(); ++i) {
    absl::StatusOr<RedisUrl> url = ParseRedisUrl(options.redis_urls[i]);
    if (!url.ok()) {
      // ParseRedisUrl's message never repeats a password.
      return absl::InvalidArgumentError(absl::StrCat(
          "BlockingClient: redis_urls[", i, "]: ", url.status().message()));
    }
    UvTransportOptions t = TransportOptionsForUrl(*url, options.tls);
    t.connection.connect_timeout = options.connect_timeout;
    servers.push_back(std::move(t));
    names.push_back(url->Display());
  }
  auto owned = std::make_unique<UvLoopThread>();
  UvLoopThread* thread = owned.get();
  std::unique_ptr<BlockingClient> client(
      new BlockingClient(std::move(options), std::move(owned), thread));
  TransportFactory make = [thread, servers = std::move(servers), names](EventLoop*)
      -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    std::vector<std::unique_ptr<Transport>> transports;
    for (size_t i = 0; i < servers.size(); ++i) {
      absl::StatusOr<std::unique_ptr<UvTransport>> t =
          UvTransport::Create(thread->uv_loop(), servers[i]);
      if (!t.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("BlockingClient: ", names[i], ": ", t.status().message()));
      }
      transports.push_back(*std::move(t));
    }
    return transports;
  };
  absl::Status started = client->Start(std::move(make), std::move(names));
  if (!started.ok()) return started;  // ~BlockingClient tears down
  return client;
}

absl::StatusOr<std::unique_ptr<BlockingClient>> BlockingClient::Create(
    LoopThread* thread, TransportFactory make_transports, BlockingClientOptions options) {
  if (thread == nullptr || make_transports == nullptr) {
    return absl::InvalidArgumentError("BlockingClient: null loop thread or transport factory");
  }
  if (!options.redis_urls.empty()) {
    return absl::InvalidArgumentError(
        "BlockingClient::Create takes transports, not redis_urls (use Connect for URLs)");
  }
  absl::Status valid = CheckCommonOptions(options, /*servers=*/1);
  if (!valid.ok()) return valid;
  if (thread->InLoopThread()) {
    return absl::FailedPreconditionError(
        "BlockingClient::Create on its own loop thread would deadlock");
  }
  std::unique_ptr<BlockingClient> client(new BlockingClient(std::move(options), nullptr, thread));
  absl::Status started = client->Start(std::move(make_transports), {});
  if (!started.ok()) return started;  // ~BlockingClient tears down
  return client;
}

absl::Status BlockingClient::Start(TransportFactory make_transports,
                                   std::vector<std::string> names) {
  // 1. Make the transports on the loop thread and wait for the connection
  //    (or a quorum), bounded by connect_timeout.
  absl::Status connected = PostAndWait<absl::Status>(
      thread_, [&](Completion<absl::Status> done) {
        absl::StatusOr<std::vector<std::unique_ptr<Transport>>> made =
            std::move(make_transports)(thread_->loop());
        if (!made.ok()) {
          done(made.status().code() == absl::StatusCode::kInvalidArgument
                   ? made.status()
                   : absl::InvalidArgumentError(absl::StrCat(
                         "BlockingClient: transport factory: ", made.status().message())));
          return;
        }
        transports_ = *std::move(made);
        if (absl::Status valid = CheckTransports(transports_, options_); !valid.ok()) {
          done(valid);
          return;
        }
        if (absl::Status fair = CheckFairOptions(options_, transports_.size()); !fair.ok()) {
          done(fair);
          return;
        }
        while (names.size() < transports_.size()) {
          names.push_back(absl::StrCat("server ", names.size()));
        }
        server_count_ = transports_.size();
        AwaitConnectQuorum(thread_->loop(), transports_, names, options_.connect_timeout,
                           std::move(done));
      });
  if (!connected.ok()) return connected;

  // 2. The policy stack, on the loop thread.
  absl::Status built = PostAndWait<absl::Status>(thread_, [&](Completion<absl::Status> done) {
    EventLoop* loop = thread_->loop();
    absl::StatusOr<std::unique_ptr<dlock::Lock>> inner =
        MakeInnerLock(loop, transports_, names, options_);
    if (!inner.ok()) {
      done(inner.status());
      return;
    }
    inner_ = *std::move(inner);
    if (options_.fair) {
      // FairLock waits in its own server-side queue: no RetryLock over it
      // (whose attempts, with wait 0, would never queue).
      done(absl::OkStatus());
      return;
    }
    RetryLockOptions r;
    r.key_prefix = options_.key_prefix;
    r.observer = options_.observer;
    // Release notifications come from the first server (every dlock release
    // publishes on each server it releases); the backoff covers the rest.
    retry_ = std::make_unique<RetryLock>(loop, inner_.get(), transports_[0].get(), r);
    if (transports_.size() == 1) {
      ReadWriteLockOptions o;
      o.key_prefix = options_.key_prefix;
      o.command_timeout = options_.command_timeout;
      o.observer = options_.observer;
      o.replica_ack.min_replicas = options_.min_replicas;
      o.replica_ack.timeout = options_.replica_ack_timeout;
      rw_ = std::make_unique<ReadWriteLock>(loop, transports_[0].get(), o);
      RetryLockOptions rr;
      rr.observer = options_.observer;
      read_retry_ = std::make_unique<RetryLock>(loop, &rw_->reader(), rr);
      write_retry_ = std::make_unique<RetryLock>(loop, &rw_->writer(), rr);
    }
    done(absl::OkStatus());
  });
  if (!built.ok()) return built;
  BlockingLockOptions facade;
  facade.auto_renew = options_.auto_renew;
  facade.renewal.watchdog.observer = options_.observer;
  if (rw_ != nullptr) {
    // No on_lost hook in the client's options: plain copies of the rest.
    for (auto* f : {&read_facade_, &write_facade_}) {
      BlockingLockOptions o;
      o.auto_renew = options_.auto_renew;
      o.renewal.watchdog.observer = options_.observer;
      *f = std::make_unique<BlockingLock>(
          thread_, f == &read_facade_ ? read_retry_.get() : write_retry_.get(), std::move(o));
    }
  }
  facade_ = std::make_unique<BlockingLock>(
      thread_, retry_ != nullptr ? retry_.get() : inner_.get(), std::move(facade));
  PermitFacadesOptions permits;
  permits.key_prefix = options_.key_prefix;
  permits.command_timeout = options_.command_timeout;
  permits.auto_renew = options_.auto_renew;
  permits.observer = options_.observer;
  permits_ = std::make_unique<PermitFacades>(
      thread_, transports_.size() == 1 ? transports_[0].get() : nullptr, permits);
  return absl::OkStatus();
}

namespace {

// Loop thread: runs `done` once `t` has no command waiting for a reply
// (cleanups such as the release of a cancelled attempt's token are answered)
// or at `deadline`, whichever comes first. Each PING goes behind everything
// sent before it on the connection, so its reply comes after theirs. A
// transport that does not report pending_commands() is not waited for.
void WhenDrained(Transport* t, EventLoop* loop, absl::Time deadline,
                 std::shared_ptr<absl::AnyInvocable<void()>> done) {
  if (!*done) return;  // already ran (e.g. a PING failed by Close)
  const absl::Duration left = deadline - loop->Now();
  if (t->pending_commands() == 0 || left <= absl::ZeroDuration()) {
    if (*done) std::exchange(*done, nullptr)();
    return;
  }
  absl::Status s = t->Send({"PING"}, left, [t, loop, deadline, done](absl::StatusOr<Reply>) {
    WhenDrained(t, loop, deadline, done);
  });
  if (!s.ok() && *done) std::exchange(*done, nullptr)();
}

}  // namespace

BlockingClient::~BlockingClient() {
  // 1. The facade: calls that begin from now on get kCancelled; acquires in
  //    flight are cancelled (their callers get kCancelled); leases still
  //    held by guards are released (answered before it returns); every call
  //    that had begun has returned. The watchdog is gone.
  if (facade_ != nullptr) facade_->Shutdown();
  if (read_facade_ != nullptr) read_facade_->Shutdown();
  if (write_facade_ != nullptr) write_facade_->Shutdown();
  if (permits_ != nullptr) permits_->Shutdown();  // the same, for permit guards
  // 2. Policies (they stop their timers and background cleanups), then let
  //    the connections answer what is still in flight (bounded by
  //    command_timeout), then close them all before destroying any, so a
  //    callback that Close() runs never meets a destroyed transport.
  (void)PostAndWait<absl::Status>(thread_, [this](Completion<absl::Status> done) {
    if (permits_ != nullptr) permits_->DestroyOnLoop();
    retry_.reset();
    read_retry_.reset();
    write_retry_.reset();
    rw_.reset();
    inner_.reset();
    auto close_all = std::make_shared<absl::AnyInvocable<void()>>(
        [this, done = std::move(done)]() mutable {
          for (auto& t : transports_) t->Close();
          transports_.clear();
          done(absl::OkStatus());
        });
    EventLoop* loop = thread_->loop();
    // Started: give what is in flight its answer. Never started (Connect
    // failed): close at once.
    const absl::Time deadline =
        loop->Now() + (facade_ != nullptr ? options_.command_timeout : absl::ZeroDuration());
    auto left = std::make_shared<size_t>(transports_.size());
    if (*left == 0) {
      (*close_all)();
      return;
    }
    // Copies of the raw pointers: close_all clears transports_.
    std::vector<Transport*> ts;
    for (auto& t : transports_) ts.push_back(t.get());
    for (Transport* t : ts) {
      auto one = std::make_shared<absl::AnyInvocable<void()>>([left, close_all] {
        if (--*left == 0) (*close_all)();
      });
      WhenDrained(t, loop, deadline, std::move(one));
    }
  });
  // Connect: runs what is still posted, lets libuv deliver the close
  // callbacks and joins the thread. Create: the caller's thread stays.
  owned_thread_.reset();
  // Inert since Shutdown: touches neither the loop nor the lock. Guards
  // that outlive it only keep its gate.
  facade_.reset();
  read_facade_.reset();
  write_facade_.reset();
  permits_.reset();
}

absl::StatusOr<LockGuard> BlockingClient::TryLock(absl::string_view resource,
                                                  absl::Duration ttl) {
  return facade_->TryLock(resource, ttl);
}

absl::StatusOr<LockGuard> BlockingClient::Lock(absl::string_view resource,
                                               absl::Duration ttl, absl::Duration wait) {
  return facade_->Lock(resource, ttl, wait);
}

absl::StatusOr<LockGuard> BlockingClient::Semaphore(absl::string_view resource,
                                                    int64_t permits, absl::Duration ttl,
                                                    absl::Duration wait) {
  absl::StatusOr<BlockingLock*> facade = permits_->For(permits);
  if (!facade.ok()) return facade.status();
  return (*facade)->Lock(resource, ttl, wait);
}

}  // namespace dlock

namespace dlock {

absl::StatusOr<LockGuard> BlockingClient::ReadLock(absl::string_view resource,
                                                   absl::Duration ttl, absl::Duration wait) {
  if (read_facade_ == nullptr) {
    return absl::InvalidArgumentError(
        "BlockingClient: read-write locks need a single server (not RedLock)");
  }
  return read_facade_->Lock(resource, ttl, wait);
}

absl::StatusOr<LockGuard> BlockingClient::WriteLock(absl::string_view resource,
                                                    absl::Duration ttl, absl::Duration wait) {
  if (write_facade_ == nullptr) {
    return absl::InvalidArgumentError(
        "BlockingClient: read-write locks need a single server (not RedLock)");
  }
  return write_facade_->Lock(resource, ttl, wait);
}

absl::StatusOr<MultiLockGuard> BlockingClient::MultiLock(std::vector<std::string> resources,
                                                         absl::Duration ttl,
                                                         absl::Duration wait) {
  AcquireOptions options;
  options.ttl = ttl;
  options.wait = wait;
  absl::StatusOr<std::vector<LockGuard>> guards =
      facade_->AcquireAll(std::move(resources), std::move(options));
  if (!guards.ok()) return guards.status();
  return MultiLockGuard(*std::move(guards));
}

}  // namespace dlock
