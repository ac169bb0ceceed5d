// Script's call object: the argv it sends, the NOSCRIPT fallback and the
// exactly-once delivery when the transport rejects either send.
#include "dlock/transport/script.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace {

// Records every argv and keeps the callbacks; the test answers them.
// Rejects the send numbered `reject_at` (1-based; 0: never).
class RecordingTransport : public Transport {
 public:
  absl::Status Send(std::vector<std::string> argv, absl::Duration timeout,
                    ReplyCallback callback) override {
    sent.push_back(std::move(argv));
    if (static_cast<int>(sent.size()) == reject_at) {
      return absl::UnavailableError("rejected");
    }
    pending.push_back(std::move(callback));
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      std::string, MessageCallback, absl::AnyInvocable<void(absl::Status) &&>) override {
    return absl::UnimplementedError("no pub/sub");
  }
  // Answers the oldest pending command.
  void Answer(absl::StatusOr<Reply> reply) {
    ReplyCallback cb = std::move(pending.front());
    pending.erase(pending.begin());
    std::move(cb)(std::move(reply));
  }

  std::vector<std::vector<std::string>> sent;
  std::vector<ReplyCallback> pending;
  int reject_at = 0;
};

const Script& TestScript() {
  static const Script* s = new Script("return 1", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  return *s;
}

// Counts how often it ran and whether it was destroyed.
struct Probe {
  int runs = 0;
  std::vector<std::string> keys_seen;
  absl::StatusOr<Reply> last = absl::UnknownError("none");
  bool destroyed = false;
};

struct Handler {
  explicit Handler(Probe* p) : probe(p), alive(std::make_unique<int>(0)) {}
  Handler(Handler&&) = default;
  ~Handler() {
    if (alive != nullptr) probe->destroyed = true;
  }
  void operator()(absl::StatusOr<Reply> r, absl::Span<const absl::string_view> keys) && {
    ++probe->runs;
    for (absl::string_view k : keys) probe->keys_seen.emplace_back(k);
    probe->last = std::move(r);
  }
  Probe* probe;
  std::unique_ptr<int> alive;  // null when moved from
};

TEST(ScriptInvokeTest, SendsEvalShaWithKeysAndArgs) {
  RecordingTransport t;
  Probe p;
  const absl::string_view keys[] = {"k1", "k2"};
  const absl::string_view args[] = {absl::string_view("a\0b", 3), "x"};
  ASSERT_TRUE(TestScript().Invoke(t, keys, args, absl::Seconds(1), Handler(&p)).ok());
  ASSERT_EQ(t.sent.size(), 1u);
  EXPECT_EQ(t.sent[0], (std::vector<std::string>{"EVALSHA", TestScript().sha1(), "2", "k1",
                                                  "k2", std::string("a\0b", 3), "x"}));
  EXPECT_EQ(p.runs, 0);
  t.Answer(Reply::Integer(7));
  EXPECT_EQ(p.runs, 1);
  EXPECT_EQ(p.keys_seen, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(*p.last, Reply::Integer(7));
  EXPECT_TRUE(p.destroyed);
}

TEST(ScriptInvokeTest, NoScriptFallsBackToEvalOnce) {
  RecordingTransport t;
  Probe p;
  const absl::string_view keys[] = {"k"};
  ASSERT_TRUE(TestScript().Invoke(t, keys, {}, absl::Seconds(1), Handler(&p)).ok());
  t.Answer(Reply::Error("NOSCRIPT No matching script"));
  EXPECT_EQ(p.runs, 0);
  ASSERT_EQ(t.sent.size(), 2u);
  EXPECT_EQ(t.sent[1], (std::vector<std::string>{"EVAL", "return 1", "1", "k"}));
  // A NOSCRIPT answer to the EVAL itself is delivered, not retried.
  t.Answer(Reply::Error("NOSCRIPT again"));
  EXPECT_EQ(t.sent.size(), 2u);
  EXPECT_EQ(p.runs, 1);
  EXPECT_TRUE(p.last->IsErrorWithPrefix("NOSCRIPT"));
  EXPECT_TRUE(p.destroyed);
}

TEST(ScriptInvokeTest, RejectedFirstSendDestroysTheHandlerUnrun) {
  RecordingTransport t;
  t.reject_at = 1;
  Probe p;
  absl::Status s = TestScript().Invoke(t, {}, {}, absl::Seconds(1), Handler(&p));
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(p.runs, 0);
  EXPECT_TRUE(p.destroyed);
}

TEST(ScriptInvokeTest, RejectedFallbackIsDeliveredOnce) {
  RecordingTransport t;
  t.reject_at = 2;
  Probe p;
  ASSERT_TRUE(TestScript().Invoke(t, {}, {}, absl::Seconds(1), Handler(&p)).ok());
  t.Answer(Reply::Error("NOSCRIPT No matching script"));
  EXPECT_EQ(p.runs, 1);
  EXPECT_TRUE(absl::IsUnavailable(p.last.status()));
  EXPECT_TRUE(p.destroyed);
}

}  // namespace
}  // namespace dlock
