// This header defines `Script`: a Lua script for Redis with its SHA-1, run
// by `EVALSHA` and, when the server answers `NOSCRIPT` (script cache empty:
// a restart, a failover, `SCRIPT FLUSH`), transparently again by `EVAL`.
//
// A `NOSCRIPT` reply means the script did not run, so the fallback can never
// run it twice. The fallback `EVAL` gets the same `timeout` again, so the
// whole call is bounded by twice the timeout.
//
// A Script is immutable after construction and thread-safe; it may be
// shared by any number of transports and loops. It must outlive the commands
// it runs (scripts are normally static constants).
#ifndef DLOCK_TRANSPORT_SCRIPT_H_
#define DLOCK_TRANSPORT_SCRIPT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dlock/transport/transport.h"

namespace dlock {

class Script {
 public:
  // `sha1` must be the lower-case hex SHA-1 of `source` (Redis's script
  // id). dlock's own scripts pass constants (lock/scripts.cc), checked by a
  // test against Sha1Hex, FakeRedis and a real server's SCRIPT LOAD, so the
  // core needs no hash code and no libcrypto.
  Script(std::string source, std::string sha1);
  // Computes the SHA-1 with OpenSSL. Defined in //transport:script_sha1
  // (link it to use this constructor); the core does not.
  explicit Script(std::string source);

  const std::string& source() const { return source_; }
  // Lower-case hex SHA-1 of the source, as Redis computes it.
  const std::string& sha1() const { return sha1_; }

  // Runs the script on `transport` with `keys` and `args`. The callback
  // contract is the transport's: exactly once, never inside this call. A
  // script error is a Reply of type kError. Returns the transport's
  // rejection (the callback then never runs).
  absl::Status Run(Transport& transport, std::vector<std::string> keys,
                   std::vector<std::string> args, absl::Duration timeout,
                   ReplyCallback callback) const;

  // The argv of `EVAL source numkeys keys... args...` (for tools and tests).
  std::vector<std::string> EvalArgv(const std::vector<std::string>& keys,
                                    const std::vector<std::string>& args) const;
  // The argv of `EVALSHA sha1 numkeys keys... args...`.
  std::vector<std::string> EvalShaArgv(const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) const;

 private:
  std::string source_;
  std::string sha1_;
};

// Lower-case hex SHA-1 of `data` (OpenSSL). Defined in
// //transport:script_sha1.
std::string Sha1Hex(absl::string_view data);

}  // namespace dlock

#endif  // DLOCK_TRANSPORT_SCRIPT_H_
