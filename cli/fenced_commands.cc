// `dlock fence-check`, `dlock fenced-set`, `dlock fenced-incr`: see
// fenced_commands.h.
#include "dlock/cli/fenced_commands.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dlock/cli/exit_codes.h"
#include "dlock/cli/flags.h"
#include "dlock/cli/session.h"
#include "dlock/fenced/fence_status.h"
#include "dlock/fenced/redis_store.h"
#include "dlock/transport/uv/redis_url.h"

namespace dlock {
namespace cli {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "dlock: %s\n", message.c_str());
  return code;
}

// The fence: --fence, else $DLOCK_FENCE.
absl::StatusOr<int64_t> FenceFrom(int64_t flag) {
  if (flag != 0) return flag;
  const char* env = std::getenv("DLOCK_FENCE");
  if (env == nullptr || *env == '\0') {
    return absl::InvalidArgumentError(
        "no fence: give --fence N, or run under `dlock run`, which exports $DLOCK_FENCE");
  }
  int64_t fence = 0;
  if (!absl::SimpleAtoi(env, &fence)) {
    return absl::InvalidArgumentError(
        absl::StrCat("$DLOCK_FENCE=\"", env, "\" is not an integer"));
  }
  return fence;
}

}  // namespace

bool IsFencedCommand(const std::string& verb) {
  return verb == "fence-check" || verb == "fenced-set" || verb == "fenced-incr";
}

int FencedCommand(const CommonOptions& common, const std::string& verb,
                  const std::vector<std::string>& args, const std::string& store,
                  int64_t fence_flag, const int64_t* floor) {
  const size_t want = verb == "fence-check" ? 1 : 3;
  if (args.size() != want) {
    return Fail(kExitUsage, verb == "fence-check" ? "fence-check needs exactly one RESOURCE"
                            : verb == "fenced-set"
                                ? "fenced-set needs RESOURCE KEY VALUE"
                                : "fenced-incr needs RESOURCE KEY DELTA");
  }
  if (floor != nullptr && verb != "fenced-incr") {
    return Fail(kExitUsage, "--floor is only for fenced-incr");
  }
  absl::StatusOr<int64_t> fence = FenceFrom(fence_flag);
  if (!fence.ok()) return Fail(kExitUsage, std::string(fence.status().message()));
  const std::string& resource = args[0];
  fenced::RedisWrite write;
  if (verb == "fenced-set") {
    write.Set(args[1], args[2]);
  } else if (verb == "fenced-incr") {
    int64_t delta = 0;
    if (!absl::SimpleAtoi(args[2], &delta)) {
      return Fail(kExitUsage, absl::StrCat("DELTA \"", args[2], "\" is not an integer"));
    }
    write.IncrBy(args[1], delta,
                 floor != nullptr ? absl::optional<int64_t>(*floor) : absl::nullopt);
  }

  std::vector<RedisUrl> urls;
  if (store.empty()) {
    urls.push_back(common.urls.at(0));
  } else {
    absl::StatusOr<RedisUrl> url =
        ParseRedisUrl(store, absl::GetFlag(FLAGS_password_env).c_str());
    if (!url.ok()) return Fail(kExitUsage, absl::StrCat("--store: ", url.status().message()));
    urls.push_back(*url);
  }
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Open(urls, common.tls, common.timeout);
  if (!session.ok()) {
    return Fail(ExitCodeForStatus(session.status()), session.status().ToString());
  }
  fenced::RedisFencedStoreOptions options;
  options.timeout = common.timeout;
  fenced::RedisFencedStore fenced_store((*session)->transport(0), options);
  bool done = false;
  absl::StatusOr<fenced::RedisWriteResult> result = absl::UnknownError("no answer");
  absl::Status sent = fenced_store.Write(resource, *fence, std::move(write),
                                         [&](absl::StatusOr<fenced::RedisWriteResult> r) {
                                           result = std::move(r);
                                           done = true;
                                         });
  if (!sent.ok()) return Fail(ExitCodeForStatus(sent), std::string(sent.message()));
  (*session)->RunUntil([&done] { return done; });
  if (!result.ok()) {
    const int code = fenced::IsStaleFence(result.status())   ? kExitStaleFence
                     : fenced::IsBelowFloor(result.status()) ? kExitBelowFloor
                                                             : ExitCodeForStatus(result.status());
    return Fail(code, std::string(result.status().message()));
  }
  if (verb == "fenced-incr") std::printf("%lld\n", static_cast<long long>(result->values[0]));
  if (common.verbose) {
    std::fprintf(stderr, "dlock: fence %lld is current for \"%s\" on %s (recorded)\n",
                 static_cast<long long>(*fence), resource.c_str(), urls[0].Display().c_str());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace dlock
