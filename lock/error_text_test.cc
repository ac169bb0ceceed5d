#include "dlock/lock/error_text.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace dlock {
namespace {

// Every argument renders as absl::StrCat / absl::FormatDuration render it,
// so a message moved from StrCat to ErrorText reads the same.
TEST(ErrorTextTest, RendersEveryArgumentAsStrCatWould) {
  const std::string key = "dlock:{r}:fence";
  const int64_t big = INT64_MIN;
  const size_t size = 1025;
  const double factor = 0.01;
  const absl::Duration d = absl::Milliseconds(1500) + absl::Nanoseconds(3);
  EXPECT_EQ(ErrorText("a % b % c % d % e % f % g %", {key, big, size, factor, d, -7, "lit"}),
            absl::StrCat("a ", key, " b ", big, " c ", size, " d ", factor, " e ",
                         absl::FormatDuration(d), " f ", -7, " g lit"));
  EXPECT_EQ(ErrorText("%", {absl::InfiniteDuration()}), "inf");
  EXPECT_EQ(ErrorText("x=%", {1.0 / 3}), absl::StrCat("x=", 1.0 / 3));
}

TEST(ErrorTextTest, PlaceholdersAndArgumentsThatDoNotPair) {
  EXPECT_EQ(ErrorText("% and %", {1}), "1 and %");      // no argument left
  EXPECT_EQ(ErrorText("none", {1, 2}), "none");           // left over: ignored
  EXPECT_EQ(ErrorText("[%][%]", {"50%", "%"}), "[50%][%]");  // text not scanned
  EXPECT_EQ(ErrorText("", {}), "");
}

TEST(ErrorTextTest, ErrorStatusCarriesTheCodeAndText) {
  absl::Status s = ErrorStatus(absl::StatusCode::kInvalidArgument, "ttl % too short",
                               {absl::Milliseconds(5)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ttl 5ms too short");
}

}  // namespace
}  // namespace dlock
