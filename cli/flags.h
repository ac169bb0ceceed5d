// The flags of the `dlock` tool (defined in flags.cc, parsed by
// command_line.h). See `dlock --help`.
#ifndef DLOCK_CLI_FLAGS_H_
#define DLOCK_CLI_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, redis);
ABSL_DECLARE_FLAG(absl::Duration, ttl);
ABSL_DECLARE_FLAG(absl::Duration, wait);
ABSL_DECLARE_FLAG(bool, fair);
ABSL_DECLARE_FLAG(bool, shared);
ABSL_DECLARE_FLAG(int64_t, permits);
ABSL_DECLARE_FLAG(std::string, on_lost);
ABSL_DECLARE_FLAG(absl::Duration, kill_after);
ABSL_DECLARE_FLAG(absl::Duration, timeout);
ABSL_DECLARE_FLAG(absl::Duration, restart_window);
ABSL_DECLARE_FLAG(std::string, prefix);
ABSL_DECLARE_FLAG(std::string, password_env);
ABSL_DECLARE_FLAG(bool, verbose);
ABSL_DECLARE_FLAG(int, pings);
ABSL_DECLARE_FLAG(bool, strict);
ABSL_DECLARE_FLAG(bool, force);
ABSL_DECLARE_FLAG(std::string, tls_ca_cert);
ABSL_DECLARE_FLAG(std::string, tls_ca_dir);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(bool, tls_insecure_skip_verify);
ABSL_DECLARE_FLAG(int, min_replicas);
ABSL_DECLARE_FLAG(absl::Duration, min_replicas_timeout);
ABSL_DECLARE_FLAG(std::string, store);
ABSL_DECLARE_FLAG(int64_t, fence);
ABSL_DECLARE_FLAG(int64_t, floor);

#endif  // DLOCK_CLI_FLAGS_H_
