#include "dlock/cli/check.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dlock {
namespace cli {
namespace {

using ::testing::HasSubstr;

ServerFacts SafeFacts() {
  ServerFacts f;
  f.address = "127.0.0.1:6379";
  f.version = "7.0.15";
  f.role = "master";
  f.maxmemory_policy = "noeviction";
  f.maxmemory = "0";
  f.appendonly = "yes";
  f.appendfsync = "always";
  f.save = "";
  f.round_trips = {absl::Microseconds(50), absl::Microseconds(70),
                   absl::Microseconds(60)};
  return f;
}

Finding::Level Worst(const std::vector<Finding>& findings) {
  Finding::Level worst = Finding::Level::kOk;
  for (const Finding& f : findings) worst = std::max(worst, f.level);
  return worst;
}

std::string Find(const std::vector<Finding>& findings, Finding::Level level) {
  for (const Finding& f : findings) {
    if (f.level == level) return f.message;
  }
  return "";
}

TEST(CheckTest, SafeServerHasNoWarnings) {
  std::vector<Finding> findings =
      AnalyzeServer(SafeFacts(), /*redlock=*/true, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kOk);
}

TEST(CheckTest, TlsWithoutCertificateVerificationIsAWarning) {
  ServerFacts f = SafeFacts();
  f.tls = true;
  std::vector<Finding> findings = AnalyzeServer(f, /*redlock=*/true, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kOk);
  f.tls_insecure_skip_verify = true;
  findings = AnalyzeServer(f, /*redlock=*/true, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kWarning);
  EXPECT_THAT(Find(findings, Finding::Level::kWarning),
              HasSubstr("--tls-insecure-skip-verify"));
}

TEST(CheckTest, EvictingPoliciesAreUnsafe) {
  for (const char* policy : {"allkeys-lru", "allkeys-random", "volatile-lru",
                             "volatile-ttl", "volatile-lfu"}) {
    ServerFacts f = SafeFacts();
    f.maxmemory_policy = policy;
    std::vector<Finding> findings = AnalyzeServer(f, false, absl::Seconds(30));
    EXPECT_EQ(Worst(findings), Finding::Level::kUnsafe) << policy;
    EXPECT_THAT(Find(findings, Finding::Level::kUnsafe), HasSubstr(policy));
  }
}

TEST(CheckTest, UnreadableConfigIsAWarning) {
  ServerFacts f = SafeFacts();
  f.maxmemory_policy.reset();
  f.config_error = absl::UnavailableError("unknown command 'CONFIG'");
  std::vector<Finding> findings = AnalyzeServer(f, false, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kWarning);
  EXPECT_THAT(Find(findings, Finding::Level::kWarning), HasSubstr("noeviction"));
}

TEST(CheckTest, RedLockWithoutFsyncAlwaysWarnsAboutDelayedRestart) {
  ServerFacts f = SafeFacts();
  f.appendonly = "no";
  EXPECT_EQ(Worst(AnalyzeServer(f, /*redlock=*/false, absl::Seconds(30))),
            Finding::Level::kInfo);
  std::vector<Finding> findings = AnalyzeServer(f, /*redlock=*/true, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kWarning);
  EXPECT_THAT(Find(findings, Finding::Level::kWarning), HasSubstr("delayed restart"));
}

TEST(CheckTest, OldVersionReplicaAndBrokenScriptingAreUnsafe) {
  ServerFacts old = SafeFacts();
  old.version = "2.6.11";
  EXPECT_EQ(Worst(AnalyzeServer(old, false, absl::Seconds(30))),
            Finding::Level::kUnsafe);
  ServerFacts replica = SafeFacts();
  replica.role = "slave";
  EXPECT_EQ(Worst(AnalyzeServer(replica, false, absl::Seconds(30))),
            Finding::Level::kUnsafe);
  ServerFacts noscript = SafeFacts();
  noscript.scripting = absl::UnavailableError("NOPERM");
  EXPECT_EQ(Worst(AnalyzeServer(noscript, false, absl::Seconds(30))),
            Finding::Level::kUnsafe);
}

TEST(CheckTest, SlowRoundTripsWarnRelativeToTtl) {
  ServerFacts f = SafeFacts();
  f.round_trips = {absl::Milliseconds(150)};
  EXPECT_EQ(Worst(AnalyzeServer(f, /*redlock=*/true, absl::Seconds(30))),
            Finding::Level::kOk);
  EXPECT_EQ(Worst(AnalyzeServer(f, /*redlock=*/true, absl::Seconds(1))),
            Finding::Level::kWarning);
}

TEST(CheckTest, ParsesVersions) {
  int a, b, c;
  EXPECT_TRUE(ParseVersion("7.0.15", &a, &b, &c));
  EXPECT_EQ(a * 10000 + b * 100 + c, 70015);
  EXPECT_TRUE(ParseVersion("2.6", &a, &b, &c));
  EXPECT_FALSE(ParseVersion("seven", &a, &b, &c));
  EXPECT_FALSE(ParseVersion("", &a, &b, &c));
}

TEST(CheckTest, RefusedPublishIsAWarningThatExplainsTheFallback) {
  ServerFacts f = SafeFacts();
  f.publish = absl::OkStatus();
  EXPECT_EQ(Worst(AnalyzeServer(f, false, absl::Seconds(30))), Finding::Level::kInfo);
  f.publish = absl::PermissionDeniedError("NOPERM this user has no permissions");
  std::vector<Finding> findings = AnalyzeServer(f, false, absl::Seconds(30));
  EXPECT_EQ(Worst(findings), Finding::Level::kWarning);
  bool explained = false;
  for (const Finding& x : findings) {
    if (x.message.find("backoff") != std::string::npos) explained = true;
  }
  EXPECT_TRUE(explained);
}

TEST(CheckTest, RefusedSubscribeIsAWarning) {
  ServerFacts f = SafeFacts();
  f.subscribe = absl::OkStatus();
  EXPECT_EQ(Worst(AnalyzeServer(f, false, absl::Seconds(30))), Finding::Level::kInfo);
  f.subscribe = absl::PermissionDeniedError("NOPERM");
  EXPECT_EQ(Worst(AnalyzeServer(f, false, absl::Seconds(30))), Finding::Level::kWarning);
}

TEST(CheckTest, SameRunIdIsOneInstance) {
  EXPECT_TRUE(SameInstanceGroups({"a", "b", "c"}).empty());
  EXPECT_TRUE(SameInstanceGroups({"", ""}).empty());  // unknown is not "same"
  std::vector<std::vector<size_t>> groups = SameInstanceGroups({"a", "b", "a", "b", "a", "c"});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{1, 3}));
}

// The restart rule's data set: young or none yet is a warning naming the
// way out with when it is safe; trusted or old is ok; off: nothing.
TEST(CheckTest, YoungDataSetIsAWarningThatNamesDlockTrust) {
  const std::string trust = "dlock trust --force --redis redis://h:1";
  const absl::Duration window = absl::Seconds(60);
  DataSetFacts f;
  f.marker_key = "dlock:data-set-began";
  f.server_now_ms = 1'000'000;
  std::vector<Finding> none = AnalyzeDataSet(f, window, trust);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].level, Finding::Level::kWarning);
  EXPECT_THAT(none[0].message, ::testing::HasSubstr("no marker"));
  EXPECT_THAT(none[0].message, ::testing::HasSubstr(trust));

  f.marker = "995000";  // began 5 s ago
  std::vector<Finding> young = AnalyzeDataSet(f, window, trust);
  ASSERT_EQ(young.size(), 1u);
  EXPECT_EQ(young[0].level, Finding::Level::kWarning);
  EXPECT_THAT(young[0].message, ::testing::HasSubstr("for another 55s"));
  EXPECT_THAT(young[0].message, ::testing::HasSubstr(trust));
  EXPECT_THAT(young[0].message, ::testing::HasSubstr("never held dlock locks"));
  EXPECT_THAT(young[0].message, ::testing::HasSubstr("restart that lost data"));

  f.marker = "900000";  // 100 s ago
  EXPECT_EQ(Worst(AnalyzeDataSet(f, window, trust)), Finding::Level::kOk);
  f.marker = "0";
  EXPECT_EQ(Worst(AnalyzeDataSet(f, window, trust)), Finding::Level::kOk);
  f.marker = "soon";
  EXPECT_EQ(Worst(AnalyzeDataSet(f, window, trust)), Finding::Level::kUnsafe);
  EXPECT_TRUE(AnalyzeDataSet(f, absl::ZeroDuration(), trust).empty());  // rule off
}

// The closing line says what the exit code says, and an OK with warnings
// says so (it used to read "result: OK (0 unsafe, 6 warnings, ...)"), while
// keeping the "result: OK" / "result: UNSAFE" / "result: INCOMPLETE" words
// that scripts match.
TEST(CheckTest, TheResultLineNamesWarningsAndKeepsItsFirstWord) {
  EXPECT_EQ(CheckResultLine(0, 0, 0, false), "result: OK (0 unsafe, 0 warnings, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(0, 6, 0, false),
            "result: OK with 6 warnings (0 unsafe, 6 warnings, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(0, 1, 0, false),
            "result: OK with 1 warning (0 unsafe, 1 warning, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(1, 2, 0, false),
            "result: UNSAFE (1 unsafe, 2 warnings, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(0, 2, 0, true),
            "result: UNSAFE under --strict (0 unsafe, 2 warnings, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(0, 0, 0, true), "result: OK (0 unsafe, 0 warnings, 0 unreachable)");
  EXPECT_EQ(CheckResultLine(0, 1, 1, false),
            "result: INCOMPLETE (0 unsafe, 1 warning, 1 unreachable)");
  EXPECT_EQ(CheckResultLine(1, 0, 1, false),
            "result: UNSAFE (1 unsafe, 0 warnings, 1 unreachable)");
}

}  // namespace
}  // namespace cli
}  // namespace dlock
