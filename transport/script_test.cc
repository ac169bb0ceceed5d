// Script's call object: what it gives Transport::SendScript (the body, the
// EVALSHA argv, kept valid until the callback has run), the default
// SendScript (EVAL: order-safe on any transport), exactly-once delivery, and
// that Script never re-sends anything itself (issue 22: a fallback EVAL sent
// from the NOSCRIPT reply ran behind later commands).
#include "dlock/transport/script.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dlock {
namespace {

// Records every argv sent with Send and keeps the callbacks; the test
// answers them. Rejects the send numbered `reject_at` (1-based; 0: never).
// Uses Transport's default SendScript.
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

// A transport with a SendScript of its own, as a connection keeps it: it
// keeps the views it was given and reads them only when answering (as a
// real connection reads them to write the script once connected, or to
// re-send it after a flush).
class ScriptAwareTransport : public RecordingTransport {
 public:
  absl::Status SendScript(absl::string_view body,
                          absl::Span<const absl::string_view> evalsha_argv,
                          absl::Duration, ReplyCallback callback) override {
    if (reject_script) return absl::UnavailableError("rejected");
    bodies.push_back(body);
    views.push_back(evalsha_argv);
    pending.push_back(std::move(callback));
    return absl::OkStatus();
  }
  // The argv of the oldest pending script, read now.
  std::vector<std::string> OldestArgv() const {
    return std::vector<std::string>(views.front().begin(), views.front().end());
  }
  std::vector<absl::string_view> bodies;
  std::vector<absl::Span<const absl::string_view>> views;
  bool reject_script = false;
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

TEST(ScriptInvokeTest, GivesSendScriptTheBodyAndAnEvalShaArgvThatOutlivesTheCall) {
  ScriptAwareTransport t;
  Probe p;
  {
    // The caller's keys and args are gone once Invoke returns.
    std::string k1 = "k1", k2 = "k2", a1("a\0b", 3), a2 = "x";
    const absl::string_view keys[] = {k1, k2};
    const absl::string_view args[] = {a1, a2};
    ASSERT_TRUE(TestScript().Invoke(t, keys, args, absl::Seconds(1), Handler(&p)).ok());
    k1.assign(10, '?');
    a1.assign(10, '?');
  }
  EXPECT_TRUE(t.sent.empty()) << "nothing through Send";
  ASSERT_EQ(t.bodies.size(), 1u);
  EXPECT_EQ(t.bodies[0], TestScript().source());
  EXPECT_EQ(t.OldestArgv(), (std::vector<std::string>{"EVALSHA", TestScript().sha1(), "2",
                                                       "k1", "k2", std::string("a\0b", 3),
                                                       "x"}));
  EXPECT_EQ(p.runs, 0);
  t.Answer(Reply::Integer(7));
  EXPECT_EQ(p.runs, 1);
  EXPECT_EQ(p.keys_seen, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(*p.last, Reply::Integer(7));
  EXPECT_TRUE(p.destroyed);
}

TEST(ScriptInvokeTest, DefaultSendScriptSendsEvalWithTheBody) {
  RecordingTransport t;
  Probe p;
  const absl::string_view keys[] = {"k"};
  const absl::string_view args[] = {"a"};
  ASSERT_TRUE(TestScript().Invoke(t, keys, args, absl::Seconds(1), Handler(&p)).ok());
  ASSERT_EQ(t.sent.size(), 1u);
  EXPECT_EQ(t.sent[0], (std::vector<std::string>{"EVAL", "return 1", "1", "k", "a"}));
  t.Answer(Reply::Integer(1));
  EXPECT_EQ(p.runs, 1);
  EXPECT_EQ(*p.last, Reply::Integer(1));
}

TEST(ScriptInvokeTest, NeverSendsAnythingItselfAfterANoScriptReply) {
  // Re-sending is the connection's job (only it knows whether a later
  // command was written behind the script): Script delivers what it gets.
  ScriptAwareTransport t;
  Probe p;
  const absl::string_view keys[] = {"k"};
  ASSERT_TRUE(TestScript().Invoke(t, keys, {}, absl::Seconds(1), Handler(&p)).ok());
  t.Answer(Reply::Error("NOSCRIPT No matching script"));
  EXPECT_TRUE(t.sent.empty());
  EXPECT_EQ(t.bodies.size(), 1u);
  EXPECT_EQ(p.runs, 1);
  EXPECT_TRUE(p.last->IsErrorWithPrefix("NOSCRIPT"));
  EXPECT_TRUE(p.destroyed);
}

TEST(ScriptInvokeTest, RejectedSendDestroysTheHandlerUnrun) {
  for (bool script_aware : {false, true}) {
    ScriptAwareTransport aware;
    aware.reject_script = true;
    RecordingTransport plain;
    plain.reject_at = 1;
    Transport& t = script_aware ? static_cast<Transport&>(aware) : plain;
    Probe p;
    absl::Status s = TestScript().Invoke(t, {}, {}, absl::Seconds(1), Handler(&p));
    EXPECT_TRUE(absl::IsUnavailable(s));
    EXPECT_EQ(p.runs, 0);
    EXPECT_TRUE(p.destroyed);
  }
}

TEST(ScriptInvokeTest, DefaultSendScriptRejectsAShortArgv) {
  RecordingTransport t;
  bool ran = false;
  const absl::string_view argv[] = {"EVALSHA", "abc"};
  absl::Status s = t.SendScript("return 1", argv, absl::Seconds(1),
                                [&ran](absl::StatusOr<Reply>) { ran = true; });
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(t.sent.empty());
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace dlock
