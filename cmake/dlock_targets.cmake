# Every library, test and binary CMake builds, each naming the Bazel target(s)
# it mirrors. tools/check_cmake_sources fails when these lists and the BUILD
# files differ (srcs and hdrs per target), or when a Bazel cc_* target is
# neither mirrored here nor listed in dlock_bazel_only() at the end.
#
# When you add a .cc/.h to a BUILD target, add it to the matching call here;
# when you add a Bazel target, mirror it here or list it as Bazel-only.
# Paths are relative to the source root. See cmake/dlockHelpers.cmake.

# ---- Installed libraries (exported as dlock::<name>) ----------------------

# Interfaces: EventLoop, Transport, Reply, Script. No libuv/hiredis/Lua.
dlock_library(transport INSTALL
  BAZEL //transport:transport //transport:script //transport:mutex //transport:script_sha1
        //transport:cluster_slot //transport:subscriber_set
  SRCS transport/reply.cc transport/script.cc transport/script_sha1.cc
       transport/cluster_slot.cc transport/subscriber_set.cc
  HDRS transport/event_loop.h transport/loop_thread.h transport/reply.h
       transport/transport.h transport/script.h transport/mutex.h
       transport/cluster_slot.h transport/subscriber_set.h
  PUBLIC_DEPS PkgConfig::dlock_absl Threads::Threads
  PRIVATE_DEPS PkgConfig::dlock_crypto)

# The real transports: libuv event loop + hiredis async client, TLS
# (OpenSSL memory BIOs + hiredis's RESP reader), Redis URLs.
dlock_library(uv INSTALL
  BAZEL //transport/uv:hiredis_reply //transport/uv:uv_event_loop
        //transport/uv:uv_loop_thread //transport/uv:hiredis_transport
        //transport/uv:redis_url //transport/uv:tls_options
        //transport/uv:tls_transport //transport/uv:uv_transport
        //transport/uv:sentinel_transport //transport/uv:sentinel_parts
        //transport/uv:command_deadlines //transport/uv:deferred_queue
        //transport/uv:reconnect_backoff
        //transport/uv:host_lookup //transport/uv:connection_options
        //transport/uv:reconnecting_transport
        //transport/uv:subscription_relay //transport/uv:held_commands
        //transport/uv:cluster_transport //transport/uv:cluster_uv
        //transport/uv:cluster_parts
  SRCS transport/uv/hiredis_reply.cc transport/uv/uv_event_loop.cc
       transport/uv/command_deadlines.cc
       transport/uv/reconnect_backoff.cc transport/uv/host_lookup.cc
       transport/uv/uv_loop_thread.cc transport/uv/loop_turns.cc
       transport/uv/background_wait.cc
       transport/uv/connection_options.cc
       transport/uv/command_ledger.cc transport/uv/pubsub_channels.cc
       transport/uv/reconnecting_connection.cc
       transport/uv/reconnecting_transport.cc transport/uv/hiredis_transport.cc
       transport/uv/hiredis_link.cc transport/uv/hiredis_link.h
       transport/uv/hiredis_uv_glue.cc transport/uv/hiredis_uv_glue.h
       transport/uv/redis_url.cc transport/uv/tls_transport.cc
       transport/uv/tls_link.cc transport/uv/tls_link.h
       transport/uv/tls_errors.cc transport/uv/tls_errors.h
       transport/uv/tls_stream.cc transport/uv/tls_stream.h
       transport/uv/uv_transport.cc transport/uv/sentinel_transport.cc
       transport/uv/subscription_relay.cc
       transport/uv/sentinel_discovery.cc transport/uv/sentinel_master.cc
       transport/uv/sentinel_options.cc transport/uv/sentinel_set.cc
       transport/uv/sentinel_waiters.cc
       transport/uv/cluster_transport.cc transport/uv/cluster_uv.cc
       transport/uv/cluster_nodes.cc transport/uv/cluster_options.cc
       transport/uv/cluster_redirect.cc transport/uv/cluster_router.cc
       transport/uv/cluster_slot_map.cc transport/uv/cluster_topology.cc
  HDRS transport/uv/hiredis_reply.h transport/uv/uv_event_loop.h
       transport/uv/uv_loop_thread.h transport/uv/loop_turns.h
       transport/uv/background_wait.h
       transport/uv/hiredis_transport.h
       transport/uv/redis_url.h transport/uv/tls_options.h
       transport/uv/tls_transport.h transport/uv/uv_transport.h
       transport/uv/sentinel_transport.h
       transport/uv/sentinel_discovery.h transport/uv/sentinel_master.h
       transport/uv/sentinel_options.h transport/uv/sentinel_set.h
       transport/uv/sentinel_waiters.h
       transport/uv/command_deadlines.h transport/uv/deferred_queue.h
       transport/uv/reconnect_backoff.h
       transport/uv/host_lookup.h transport/uv/connection_options.h
       transport/uv/command_ledger.h transport/uv/connect_waiters.h transport/uv/pubsub_channels.h
       transport/uv/reconnecting_connection.h
       transport/uv/reconnecting_transport.h transport/uv/redis_link.h
       transport/uv/subscription_relay.h transport/uv/held_commands.h
       transport/uv/cluster_transport.h transport/uv/cluster_uv.h
       transport/uv/cluster_nodes.h transport/uv/cluster_options.h
       transport/uv/cluster_redirect.h transport/uv/cluster_router.h
       transport/uv/cluster_slot_map.h transport/uv/cluster_topology.h
  PUBLIC_DEPS dlock::transport PkgConfig::dlock_absl PkgConfig::dlock_libuv
  PRIVATE_DEPS PkgConfig::dlock_hiredis PkgConfig::dlock_ssl)

# The in-memory fake (manual clock, FakeRedis on Lua 5.1): for users' tests.
dlock_library(fake INSTALL
  BAZEL //transport/fake:manual_event_loop //transport/fake:fake_redis
        //transport/fake:fake_transport //transport/fake:fake_cluster
        //transport/fake:std_loop_thread
  SRCS transport/fake/manual_event_loop.cc transport/fake/fake_redis.cc
       transport/fake/std_loop_thread.cc
       transport/fake/fake_redis_commands.cc transport/fake/fake_redis_internal.cc
       transport/fake/fake_redis_keyspace.cc transport/fake/fake_redis_session.cc
       transport/fake/fake_redis_strings.cc transport/fake/fake_redis_hashes.cc
       transport/fake/fake_redis_pubsub.cc
       transport/fake/fake_redis_scripting.cc transport/fake/fake_redis_server.cc
       transport/fake/fake_redis_lua.cc transport/fake/fake_redis_lua_bridge.cc
       transport/fake/fake_redis_lua_reply.cc
       transport/fake/fake_redis_zsets.cc transport/fake/fake_transport.cc transport/fake/fake_cluster.cc
       transport/fake/fake_command_queue.cc transport/fake/fake_fault_plan.cc
       transport/fake/fake_script_sender.cc transport/fake/fake_sent_log.cc
       transport/fake/fake_subscriptions.cc
  HDRS transport/fake/manual_event_loop.h transport/fake/fake_redis.h
       transport/fake/std_loop_thread.h
       transport/fake/fake_redis_commands.h transport/fake/fake_redis_keyspace.h
       transport/fake/fake_redis_session.h transport/fake/fake_redis_strings.h
       transport/fake/fake_redis_hashes.h transport/fake/fake_redis_zsets.h
       transport/fake/fake_redis_scripting.h transport/fake/fake_redis_server.h
       transport/fake/fake_redis_internal.h transport/fake/fake_redis_lua.h
       transport/fake/fake_redis_lua_bridge.h
       transport/fake/fake_redis_pubsub.h
       transport/fake/fake_transport.h transport/fake/fake_cluster.h
       transport/fake/fake_command_queue.h transport/fake/fake_fault_plan.h
       transport/fake/fake_script_sender.h transport/fake/fake_sent_log.h
       transport/fake/fake_subscriptions.h transport/fake/tracked_tasks.h
  PUBLIC_DEPS dlock::transport PkgConfig::dlock_absl
  PRIVATE_DEPS PkgConfig::dlock_lua PkgConfig::dlock_crypto)

# Lock interface, observer, scripts, SimpleLock, RetryLock, ReentrantLock.
dlock_library(lock INSTALL
  BAZEL //lock:lock //lock:observer //lock:scripts //lock:lease_rules //lock:lease_options
        //lock:keys //lock:tokens //lock:reply_status //lock:lease_core
        //lock:lease_cleanup //lock:lease_reports //lock:single_server_acquire
        //lock:lease_release_extend
        //lock:lock_commands //lock:simple_lock //lock:retry_lock //lock:reentrant_lock
        //lock:fair_lock //lock:read_write_lock //lock:multi_lock //lock:semaphore
        //lock:replica_ack //lock:replica_ack_options //lock:lease_command
  SRCS lock/observer.cc lock/scripts.cc lock/fair_scripts.cc lock/handoff_scripts.cc lock/lease_rules.cc lock/error_text.cc lock/keys.cc
       lock/tokens.cc lock/reply_status.cc lock/lease_core.cc lock/lease_cleanup.cc
       lock/single_server_acquire.cc lock/lease_release_extend.cc lock/lock_commands.cc
       lock/replica_ack.cc lock/replica_ack_options.cc lock/lease_command.cc
       lock/lease_reports.cc
       lock/simple_lock.cc lock/retry_lock.cc lock/retry_attempts.cc lock/retry_lock_wake.cc
       lock/retry_handoff_queue.cc lock/retry_release.cc
       lock/retry_backoff.cc lock/reentrant_lock.cc
       lock/fair_commands.cc lock/fair_lock.cc lock/fair_wait.cc
       lock/read_write_scripts.cc lock/read_write_lock.cc lock/write_acquire_tx.cc lock/multi_lock.cc
       lock/semaphore_scripts.cc lock/semaphore.cc
  HDRS lock/lock.h lock/observer.h lock/scripts.h lock/script_prelude.h lock/lease_rules.h lock/error_text.h
       lock/lease_options.h
       lock/keys.h lock/tokens.h lock/reply_status.h lock/lease_core.h
       lock/lease_cleanup.h lock/single_server_acquire.h lock/lease_release_extend.h
       lock/lock_commands.h lock/replica_ack.h lock/replica_ack_options.h
       lock/lease_command.h
       lock/lease_reports.h
       lock/simple_lock.h lock/retry_lock.h lock/retry_backoff.h
       lock/retry_lock_internal.h lock/reentrant_lock.h
       lock/fair_scripts.h lock/handoff_scripts.h lock/fair_commands.h lock/fair_lock.h
       lock/fair_lock_internal.h
       lock/read_write_scripts.h lock/read_write_lock.h lock/write_acquire_tx.h lock/multi_lock.h
       lock/semaphore_scripts.h lock/semaphore.h
  PUBLIC_DEPS dlock::transport PkgConfig::dlock_absl
  PRIVATE_DEPS PkgConfig::dlock_crypto)

# The lease watchdog.
dlock_library(watchdog INSTALL
  BAZEL //watchdog:watchdog
  SRCS watchdog/renewal_schedule.cc watchdog/watchdog.cc
  HDRS watchdog/renewal_schedule.h watchdog/watchdog.h
  PUBLIC_DEPS dlock::lock dlock::transport PkgConfig::dlock_absl)

# RedLock over N servers.
dlock_library(redlock INSTALL
  BAZEL //redlock:redlock
  SRCS redlock/acquire_attempts.cc redlock/acquire_clock.cc redlock/acquire_op.cc redlock/acquire_votes.cc redlock/attempt_releases.cc redlock/core.cc
       redlock/extend_op.cc redlock/fence_sync.cc redlock/quorum_round.cc
       redlock/redlock.cc redlock/release_op.cc redlock/run_id_tracker.cc
  HDRS redlock/acquire_attempts.h redlock/acquire_clock.h redlock/acquire_votes.h redlock/attempt_releases.h redlock/core.h redlock/fence_sync.h
       redlock/operations.h redlock/quorum_round.h redlock/redlock.h redlock/run_id_tracker.h
  PUBLIC_DEPS dlock::lock dlock::transport PkgConfig::dlock_absl)

# The blocking facade (BlockingLock/LockGuard, auto-renewal an option) and
# the post-and-wait helper.
dlock_library(blocking INSTALL
  BAZEL //blocking:post_and_wait //blocking:blocking_lock
  SRCS blocking/blocking_lock.cc blocking/multi_lock_guard.cc
       blocking/held_leases.cc
  HDRS blocking/post_and_wait.h blocking/blocking_lock.h blocking/multi_lock_guard.h
       blocking/held_leases.h blocking/acquires_in_flight.h
  PUBLIC_DEPS dlock::watchdog dlock::lock dlock::transport PkgConfig::dlock_absl)

# BlockingClient over caller-made transports (BlockingClient::Create): no
# network stack (tools/check_deps checks the Bazel side).
dlock_library(blocking_client INSTALL
  BAZEL //blocking:blocking_client
  SRCS blocking/blocking_client.cc blocking/client_connections.cc blocking/client_locks.cc
       blocking/client_options.cc blocking/permit_facades.cc
  HDRS blocking/blocking_client.h blocking/client_connections.h
       blocking/client_locks.h blocking/client_options.h blocking/permit_facades.h
  PUBLIC_DEPS dlock::blocking dlock::lock dlock::transport PkgConfig::dlock_absl
  PRIVATE_DEPS dlock::watchdog dlock::redlock)

# BlockingClient with ConnectBlockingClient: from Redis URLs (libuv,
# hiredis, OpenSSL through dlock::uv).
dlock_library(client INSTALL
  BAZEL //blocking:connect
  SRCS blocking/connect.cc blocking/url_transports.cc
  HDRS blocking/connect.h blocking/url_transports.h
  PUBLIC_DEPS dlock::blocking_client dlock::transport PkgConfig::dlock_absl
  PRIVATE_DEPS dlock::uv)

# ---- Fenced writes: the Redis store (issue 24) -----------------------------
# The outcome every fenced store reports and the Redis fenced store, over
# the transport interfaces only (dlock::fenced); its blocking wrapper over
# PostAndWait (dlock::fenced_blocking); the one-call client from a URL
# (dlock::fenced_client). pkg-config: dlock-fenced.pc.

dlock_library(fenced INSTALL
  BAZEL //fenced:fence_status //fenced:redis_store_script //fenced:redis_store
  SRCS fenced/fence_status.cc fenced/redis_store_script.cc fenced/redis_store.cc
  HDRS fenced/fence_status.h fenced/redis_store_script.h fenced/redis_store.h
  PUBLIC_DEPS dlock::transport PkgConfig::dlock_absl)

dlock_library(fenced_blocking INSTALL
  BAZEL //fenced:blocking_redis_store
  SRCS fenced/blocking_redis_store.cc
  HDRS fenced/blocking_redis_store.h
  PUBLIC_DEPS dlock::fenced dlock::blocking dlock::transport PkgConfig::dlock_absl)

dlock_library(fenced_client INSTALL
  BAZEL //fenced:redis_store_client
  SRCS fenced/redis_store_client.cc
  HDRS fenced/redis_store_client.h
  PUBLIC_DEPS dlock::fenced_blocking dlock::fenced dlock::transport PkgConfig::dlock_absl
  PRIVATE_DEPS dlock::uv)

dlock_library(redis_store_suite TESTONLY
  BAZEL //fenced:redis_store_suite
  HDRS fenced/redis_store_suite.h
  PUBLIC_DEPS dlock::fenced dlock::status_matchers)

dlock_test(fence_status_test BAZEL //fenced:fence_status_test
  SRCS fenced/fence_status_test.cc DEPS dlock::fenced)
dlock_test(redis_store_fake_test BAZEL //fenced:redis_store_fake_test
  SRCS fenced/redis_store_fake_test.cc
  DEPS dlock::redis_store_suite dlock::fenced dlock::fake dlock::status_matchers)

dlock_bazel_only(//fenced:redis_store_real_test //fenced:redis_store_client_real_test
  REASON "needs a redis-server (tools/test runs it under Bazel)")

# ---- The dlock CLI ---------------------------------------------------------

# Internal (not installed): the CLI's command line and subcommands.
dlock_library(cli
  BAZEL //cli:command_line //cli:check //cli:commands //cli:fenced_commands
  SRCS cli/command_line.cc cli/flags.cc cli/check.cc cli/check_command.cc
       cli/fenced_commands.cc
       cli/lock_key.cc cli/run_command.cc cli/session.cc cli/status_command.cc
       cli/trust_command.cc cli/unlock_command.cc cli/readers_status.cc
       cli/fair_queue_status.cc
       cli/check_sentinel.cc
       cli/check_cluster.cc cli/check_cluster_command.cc cli/trust_cluster.cc
       cli/command_env.cc cli/command_group.cc cli/death_watcher.cc cli/process_group.cc
       cli/run_exit.cc cli/run_lease.cc cli/run_lock.cc cli/run_observer.cc
       cli/signal_watch.cc cli/terminal.cc
  HDRS cli/command_line.h cli/exit_codes.h cli/flags.h cli/check.h cli/check_sentinel.h
       cli/commands.h cli/lock_key.h cli/session.h cli/readers_status.h
       cli/fair_queue_status.h
       cli/check_cluster.h cli/check_gather.h cli/trust_cluster.h
       cli/fenced_commands.h
       cli/command_env.h cli/command_group.h cli/death_watcher.h cli/process_group.h
       cli/run_exit.h cli/run_lease.h cli/run_lock.h cli/run_observer.h
       cli/signal_watch.h cli/terminal.h
  PUBLIC_DEPS dlock::client dlock::fenced dlock::lock dlock::redlock dlock::watchdog
              dlock::uv PkgConfig::dlock_absl PkgConfig::dlock_absl_flags
              PkgConfig::dlock_libuv)

dlock_binary(dlock INSTALL
  BAZEL //cli:dlock
  SRCS cli/main.cc
  DEPS dlock::cli)

# ---- Test helpers (only with DLOCK_BUILD_TESTS) ----------------------------

dlock_library(status_matchers TESTONLY
  BAZEL //testing:status_matchers
  HDRS testing/status_matchers.h
  PUBLIC_DEPS PkgConfig::dlock_absl GTest::gmock)

dlock_library(acquire_result TESTONLY
  BAZEL //testing:acquire_result
  HDRS testing/acquire_result.h
  PUBLIC_DEPS dlock::lock dlock::status_matchers GTest::gmock)

dlock_library(fake_server_test_base TESTONLY
  BAZEL //blocking:fake_server_test_base
  HDRS blocking/fake_server_test_base.h
  PUBLIC_DEPS dlock::blocking_client dlock::fake dlock::status_matchers GTest::gmock)

dlock_library(uv_test_loop TESTONLY
  BAZEL //transport/uv:uv_test_loop
  HDRS transport/uv/uv_test_loop.h
  PUBLIC_DEPS dlock::transport PkgConfig::dlock_absl PkgConfig::dlock_libuv)

dlock_library(lock_behavior_suite TESTONLY
  BAZEL //lock:lock_behavior_suite //lock:semaphore_behavior_suite
        //lock:primitive_behavior_suite
  HDRS lock/lock_behavior_suite.h lock/semaphore_behavior_suite.h
       lock/primitive_behavior_suite.h
  PUBLIC_DEPS dlock::lock dlock::status_matchers GTest::gmock)

dlock_library(stallable_loop TESTONLY
  BAZEL //watchdog:stallable_loop
  HDRS watchdog/stallable_loop.h
  PUBLIC_DEPS dlock::fake dlock::transport)

dlock_library(torture_client TESTONLY
  BAZEL //tests/torture:torture_client
  SRCS tests/torture/torture_client.cc
  HDRS tests/torture/torture_client.h
  PUBLIC_DEPS dlock::lock dlock::transport PkgConfig::dlock_absl)

dlock_library(primitive_check TESTONLY
  BAZEL //tests/torture:primitive_check
  SRCS tests/torture/primitive_check.cc
  HDRS tests/torture/primitive_check.h
  PUBLIC_DEPS PkgConfig::dlock_absl)

# ---- Unit tests CTest runs (GoogleTest + the fake; no redis-server) --------

dlock_test(reply_test BAZEL //transport:reply_test
  SRCS transport/reply_test.cc DEPS dlock::transport)
dlock_test(script_test BAZEL //transport:script_test
  SRCS transport/script_test.cc DEPS dlock::transport)
dlock_test(mutex_test BAZEL //transport:mutex_test
  SRCS transport/mutex_test.cc DEPS dlock::transport)
dlock_test(manual_event_loop_test BAZEL //transport/fake:manual_event_loop_test
  SRCS transport/fake/manual_event_loop_test.cc DEPS dlock::fake)
dlock_test(std_loop_thread_test BAZEL //transport/fake:std_loop_thread_test
  SRCS transport/fake/std_loop_thread_test.cc DEPS dlock::fake)
dlock_test(fake_redis_test BAZEL //transport/fake:fake_redis_test
  SRCS transport/fake/fake_redis_test.cc DEPS dlock::fake)
dlock_test(fake_redis_zsets_test BAZEL //transport/fake:fake_redis_zsets_test
  SRCS transport/fake/fake_redis_zsets_test.cc DEPS dlock::fake)
dlock_test(fake_transport_test BAZEL //transport/fake:fake_transport_test
  SRCS transport/fake/fake_transport_test.cc
  DEPS dlock::fake dlock::uv dlock::status_matchers)
dlock_test(fake_cluster_test BAZEL //transport/fake:fake_cluster_test
  SRCS transport/fake/fake_cluster_test.cc
  DEPS dlock::fake dlock::uv dlock::lock dlock::status_matchers)
dlock_test(uv_event_loop_test BAZEL //transport/uv:uv_event_loop_test
  SRCS transport/uv/uv_event_loop_test.cc DEPS dlock::uv dlock::uv_test_loop)
dlock_test(uv_loop_thread_test BAZEL //transport/uv:uv_loop_thread_test
  SRCS transport/uv/uv_loop_thread_test.cc DEPS dlock::uv)
dlock_test(hiredis_reply_test BAZEL //transport/uv:hiredis_reply_test
  SRCS transport/uv/hiredis_reply_test.cc DEPS dlock::uv)
dlock_test(deferred_queue_test BAZEL //transport/uv:deferred_queue_test
  SRCS transport/uv/deferred_queue_test.cc DEPS dlock::uv dlock::fake)
dlock_test(held_commands_test BAZEL //transport/uv:held_commands_test
  SRCS transport/uv/held_commands_test.cc DEPS dlock::uv dlock::fake)
dlock_test(subscription_relay_test BAZEL //transport/uv:subscription_relay_test
  SRCS transport/uv/subscription_relay_test.cc DEPS dlock::uv)
dlock_test(reconnect_backoff_test BAZEL //transport/uv:reconnect_backoff_test
  SRCS transport/uv/reconnect_backoff_test.cc DEPS dlock::uv)
dlock_test(reconnecting_transport_test BAZEL //transport/uv:reconnecting_transport_test
  SRCS transport/uv/reconnecting_transport_test.cc
  DEPS dlock::uv dlock::uv_test_loop dlock::status_matchers)
dlock_test(host_lookup_test BAZEL //transport/uv:host_lookup_test
  SRCS transport/uv/host_lookup_test.cc DEPS dlock::uv)
dlock_test(post_and_wait_test BAZEL //blocking:post_and_wait_test
  SRCS blocking/post_and_wait_test.cc DEPS dlock::blocking dlock::uv)
dlock_test(blocking_client_fake_test BAZEL //blocking:blocking_client_fake_test
  SRCS blocking/blocking_client_fake_test.cc
  DEPS dlock::blocking_client dlock::fake dlock::uv dlock::fake_server_test_base dlock::status_matchers)
dlock_test(blocking_client_release_drain_fake_test
  BAZEL //blocking:blocking_client_release_drain_fake_test
  SRCS blocking/blocking_client_release_drain_fake_test.cc
  DEPS dlock::blocking_client dlock::lock dlock::fake dlock::uv dlock::status_matchers)
dlock_test(fair_client_fake_test BAZEL //blocking:fair_client_fake_test
  SRCS blocking/fair_client_fake_test.cc
  DEPS dlock::blocking_client dlock::fake dlock::uv dlock::fake_server_test_base dlock::status_matchers)
dlock_test(rw_multi_client_fake_test BAZEL //blocking:rw_multi_client_fake_test
  SRCS blocking/rw_multi_client_fake_test.cc
  DEPS dlock::blocking_client dlock::fake dlock::fake_server_test_base dlock::status_matchers)
dlock_test(blocking_lock_fake_test BAZEL //blocking:blocking_lock_fake_test
  SRCS blocking/blocking_lock_fake_test.cc
  DEPS dlock::blocking dlock::lock dlock::fake dlock::uv dlock::status_matchers)
dlock_test(observer_test BAZEL //lock:observer_test
  SRCS lock/observer_test.cc DEPS dlock::lock)
dlock_test(lock_behavior_fake_test BAZEL //lock:lock_behavior_fake_test
  SRCS lock/lock_behavior_fake_test.cc DEPS dlock::lock_behavior_suite dlock::fake)
dlock_test(simple_lock_test BAZEL //lock:simple_lock_test
  SRCS lock/simple_lock_test.cc DEPS dlock::lock dlock::fake dlock::acquire_result dlock::status_matchers)
dlock_test(replica_ack_test BAZEL //lock:replica_ack_test
  SRCS lock/replica_ack_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(policy_options_test BAZEL //lock:policy_options_test
  SRCS lock/policy_options_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(retry_lock_test BAZEL //lock:retry_lock_test
  SRCS lock/retry_lock_test.cc DEPS dlock::lock dlock::fake dlock::acquire_result dlock::status_matchers)
dlock_test(handoff_test BAZEL //lock:handoff_test
  SRCS lock/handoff_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(fair_lock_test BAZEL //lock:fair_lock_test
  SRCS lock/fair_lock_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(fence_hwm_test BAZEL //lock:fence_hwm_test
  SRCS lock/fence_hwm_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(error_text_test BAZEL //lock:error_text_test
  SRCS lock/error_text_test.cc DEPS dlock::lock)
dlock_test(fair_lock_torture_test BAZEL //lock:fair_lock_torture_test
  SRCS lock/fair_lock_torture_test.cc DEPS dlock::lock dlock::fake)
dlock_test(scripts_sha1_test BAZEL //lock:scripts_sha1_test
  SRCS lock/scripts_sha1_test.cc DEPS dlock::lock dlock::fake)
dlock_test(reentrant_lock_test BAZEL //lock:reentrant_lock_test
  SRCS lock/reentrant_lock_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(lease_ttl_test BAZEL //lock:lease_ttl_test
  SRCS lock/lease_ttl_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(keys_test BAZEL //lock:keys_test
  SRCS lock/keys_test.cc DEPS dlock::lock)
dlock_test(error_reply_test BAZEL //lock:error_reply_test
  SRCS lock/error_reply_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(semaphore_test BAZEL //lock:semaphore_test
  SRCS lock/semaphore_test.cc
  DEPS dlock::lock dlock::watchdog dlock::fake dlock::acquire_result dlock::status_matchers)
dlock_test(release_publish_test BAZEL //lock:release_publish_test
  SRCS lock/release_publish_test.cc DEPS dlock::lock dlock::fake dlock::status_matchers)
dlock_test(read_write_lock_test BAZEL //lock:read_write_lock_test
  SRCS lock/read_write_lock_test.cc
  DEPS dlock::lock dlock::watchdog dlock::fake dlock::status_matchers)
dlock_test(multi_lock_test BAZEL //lock:multi_lock_test
  SRCS lock/multi_lock_test.cc
  DEPS dlock::lock dlock::watchdog dlock::fake dlock::status_matchers)
dlock_test(late_grant_test BAZEL //lock:late_grant_test
  SRCS lock/late_grant_test.cc DEPS dlock::lock dlock::fake dlock::acquire_result dlock::status_matchers)
dlock_test(read_write_multi_torture_test BAZEL //lock:read_write_multi_torture_test
  SRCS lock/read_write_multi_torture_test.cc DEPS dlock::lock dlock::fake)
dlock_test(redlock_ttl_test BAZEL //redlock:redlock_ttl_test
  SRCS redlock/redlock_ttl_test.cc DEPS dlock::redlock dlock::fake dlock::status_matchers)
dlock_test(fence_script_sha1_test BAZEL //redlock:fence_script_sha1_test
  SRCS redlock/fence_script_sha1_test.cc DEPS dlock::redlock dlock::fake)
dlock_test(redlock_test BAZEL //redlock:redlock_test
  SRCS redlock/redlock_test.cc
  DEPS dlock::redlock dlock::fake dlock::status_matchers)
dlock_test(redlock_watchdog_test BAZEL //redlock:redlock_watchdog_test
  SRCS redlock/redlock_watchdog_test.cc
  DEPS dlock::redlock dlock::watchdog dlock::fake dlock::status_matchers)
dlock_test(watchdog_test BAZEL //watchdog:watchdog_test
  SRCS watchdog/watchdog_test.cc
  DEPS dlock::watchdog dlock::stallable_loop dlock::status_matchers)
dlock_test(watchdog_fake_test BAZEL //watchdog:watchdog_fake_test
  SRCS watchdog/watchdog_fake_test.cc
  DEPS dlock::watchdog dlock::redlock dlock::stallable_loop dlock::fake
       dlock::status_matchers)
dlock_test(renewal_schedule_test BAZEL //watchdog:renewal_schedule_test
  SRCS watchdog/renewal_schedule_test.cc
  DEPS dlock::watchdog dlock::fake)
dlock_test(watchdog_scale_test BAZEL //watchdog:watchdog_scale_test
  SRCS watchdog/watchdog_scale_test.cc
  DEPS dlock::watchdog dlock::fake dlock::status_matchers)
dlock_test(cluster_slot_test BAZEL //transport:cluster_slot_test
  SRCS transport/cluster_slot_test.cc DEPS dlock::transport)
dlock_test(redis_url_test BAZEL //transport/uv:redis_url_test
  SRCS transport/uv/redis_url_test.cc DEPS dlock::uv dlock::status_matchers)
dlock_test(command_line_test BAZEL //cli:command_line_test
  SRCS cli/command_line_test.cc DEPS dlock::cli dlock::status_matchers)
dlock_test(check_test BAZEL //cli:check_test
  SRCS cli/check_test.cc cli/check_sentinel_test.cc DEPS dlock::cli)
dlock_test(check_cluster_test BAZEL //cli:check_cluster_test
  SRCS cli/check_cluster_test.cc DEPS dlock::cli)
dlock_test(run_parts_test BAZEL //cli:run_parts_test
  SRCS cli/command_env_test.cc cli/process_group_test.cc cli/run_exit_test.cc
  DEPS dlock::cli)
dlock_test(checker_test BAZEL //tests/torture:checker_test
  SRCS tests/torture/checker_test.cc DEPS dlock::torture_client)
dlock_test(fake_torture_test BAZEL //tests/torture:fake_torture_test
  SRCS tests/torture/fake_torture_test.cc
  DEPS dlock::torture_client dlock::lock dlock::redlock dlock::fake)
dlock_test(semaphore_torture_test BAZEL //tests/torture:semaphore_torture_test
  SRCS tests/torture/semaphore_torture_test.cc DEPS dlock::lock dlock::watchdog dlock::fake)
dlock_test(primitive_check_test BAZEL //tests/torture:primitive_check_test
  SRCS tests/torture/primitive_check_test.cc DEPS dlock::primitive_check)

# ---- PostgreSQL fenced store (issue 24; optional: libpq) ------------------
# PgFencedStore over libpq, on top of dlock::fenced (the stale-fence outcome).
# Built only when libpq is found (pkg-config libpq, Debian libpq-dev).
# pkg-config: dlock-fenced-pg.pc.
dlock_library(fenced_pg INSTALL
  BAZEL //fenced:pg_store
  SRCS fenced/pg_store.cc
  HDRS fenced/pg_store.h
  PUBLIC_DEPS dlock::fenced PkgConfig::dlock_absl
  PRIVATE_DEPS PkgConfig::dlock_libpq
  REQUIRES dlock::fenced PkgConfig::dlock_libpq)

# ---- Bazel targets CMake does not build ------------------------------------

dlock_bazel_only(//metrics/...
  REASON "the Prometheus observer (prometheus-cpp) is built and tested under Bazel only for now")
dlock_bazel_only(//examples/... REASON "examples run under Bazel (tools/demo)")
dlock_bazel_only(//bench/... REASON "benchmarks run under Bazel (bench/run)")
dlock_bazel_only(//watchdog:watchdog_bench REASON "benchmark binary")
dlock_bazel_only(//client:quickstart_blocking //client:quickstart_async
  REASON "README quick-starts, run under Bazel against a private redis-server")
dlock_bazel_only(//testing:redis_server //testing:redis_server_test //testing:redis_process
  //testing:server_child
  //testing:redis_cluster //testing:redis_cluster_test //lock:keys_cluster_test
  //transport/uv:cluster_transport_test //tests/cluster/...
  //transport/uv:hiredis_transport_test //blocking:blocking_client_test
  //blocking:blocking_client_tls_test
  //transport/uv:tls_test_server //transport/uv:tls_transport_test
  //transport/uv:script_order_check //transport/uv:transport_contract_suite //tests/env/...
  //tests/lock/... //tests/redlock/... //tests/watchdog/... //tests/cli/...
  //tests/differential/... //watchdog:renewal_check //tests/probes:peer_bugs_real_test
  //tests/probes:renewal_probe
  REASON "need a redis-server (tools/test runs them under Bazel, the CMake consumer covers the installed real path)")
dlock_bazel_only(//testing:sentinel_deployment //tests/sentinel:sentinel_failover_test
  //tests/sentinel:lock_behavior_sentinel_test //tests/sentinel:sentinel_readonly_test
  //transport/uv:sentinel_transport_fake_test //tests/probes:sentinel_probe_test
  REASON "Sentinel: real redis-server --sentinel processes; the scripted-connection unit test runs under Bazel")
dlock_bazel_only(//tests/torture:torture_driver //tests/torture:torture_worker
  //tests/torture:torture_main //tests/torture:torture_test
  //tests/torture:worker_processes //tests/torture:primitive_driver
  //tests/torture:primitive_worker //tests/torture:primitive_torture_test
  //tests/torture:network_check //tests/torture:network_check_test
  //tests/torture:network_driver //tests/torture:network_torture_test //tests/netfault/...
  REASON "the torture run: redis-servers and Bazel runfiles")
dlock_bazel_only(//testing:pg_process //testing:pg_server //testing:pg_server_test
  //fenced:pg_store_test //fenced:pg_store_commit_test //tests/torture:fenced_worker
  //tests/torture:fenced_torture
  //tests/torture:fenced_torture_test //tests/torture:fenced_torture_main
  REASON "need a private PostgreSQL (initdb + postgres), run under Bazel")
