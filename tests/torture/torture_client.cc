#include "dlock/tests/torture/torture_client.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dlock {
namespace torture {

namespace {

// Both register scripts open with the fence check: a fence below the
// highest one seen (KEYS[2]) is refused with {0, max}.
constexpr char kFenceCheck[] = R"lua(
local max = tonumber(redis.call('get', KEYS[2]) or '0')
local f = tonumber(ARGV[1])
if f < max then
  return {0, max}
end
redis.call('set', KEYS[2], ARGV[1])
)lua";

}  // namespace

const Script& FencedReadScript() {
  static const Script* s = new Script(
      absl::StrCat(kFenceCheck, "return {1, tonumber(redis.call('get', KEYS[1]) or '0')}\n"));
  return *s;
}

const Script& FencedWriteScript() {
  static const Script* s = new Script(absl::StrCat(kFenceCheck, R"lua(redis.call('set', KEYS[1], ARGV[2])
redis.call('incr', KEYS[3])
return {1, max}
)lua"));
  return *s;
}

const char* CsOutcomeName(CsOutcome o) {
  switch (o) {
    case CsOutcome::kWritten: return "written";
    case CsOutcome::kReadRejected: return "read_rejected";
    case CsOutcome::kWriteRejected: return "write_rejected";
    case CsOutcome::kExpiredLocally: return "expired_locally";
    case CsOutcome::kStoreError: return "store_error";
  }
  return "?";
}

namespace {

// {flag, value} from a fenced script; false on any other shape.
bool ParsePair(const absl::StatusOr<Reply>& r, int64_t* flag, int64_t* value) {
  if (!r.ok() || !r->is_array() || r->elements.size() != 2 ||
      !r->elements[0].is_integer() || !r->elements[1].is_integer()) {
    return false;
  }
  *flag = r->elements[0].integer;
  *value = r->elements[1].integer;
  return true;
}

int64_t ParseIntOrZero(const Reply& r) {
  if (r.is_integer()) return r.integer;
  if (r.is_string()) return std::strtoll(r.str.c_str(), nullptr, 10);
  return 0;
}

}  // namespace

struct TortureClient::State : std::enable_shared_from_this<TortureClient::State> {
  EventLoop* loop;
  Lock* lock;
  Transport* store;
  ClientOptions o;
  Clock clock;
  Sink sink;
  InCs in_cs;
  ReleaseSink release_sink;
  bool idle = false;

  bool stopping = false;
  bool finished = false;
  std::function<void()> on_stopped;
  TimerId backoff_timer = 0;
  int64_t acquired = 0;
  int64_t acquire_errors = 0;

  // The current critical section.
  Lease lease;
  CsRecord rec;
  int pending = 0;
  bool store_error = false;
  bool read_ok = false;
  bool write_ok = false;
  int64_t value = 0;
  int64_t unf_value = 0;

  void Finish() {
    if (finished) return;
    auto keep_alive = shared_from_this();
    finished = true;
    if (on_stopped) {
      auto done = std::move(on_stopped);
      done();
    }
  }

  void Acquire() {
    if (stopping) {
      if (idle && o.on_idle) o.on_idle(false);
      idle = false;
      Finish();
      return;
    }
    auto self = shared_from_this();
    if (o.gate && o.gate()) {
      if (!idle && o.on_idle) o.on_idle(true);
      idle = true;
      backoff_timer = loop->RunAfter(o.gate_poll, [self]() {
        self->backoff_timer = 0;
        self->Acquire();
      });
      return;
    }
    if (idle && o.on_idle) o.on_idle(false);
    idle = false;
    auto handle = lock->Acquire(o.resource, o.acquire,
                                [self](absl::StatusOr<Lease> l) { self->OnLease(std::move(l)); });
    if (!handle.ok()) {
      // A bad configuration: nothing will ever succeed.
      ++acquire_errors;
      stopping = true;
      Finish();
    }
  }

  void Backoff() {
    if (stopping) {
      Finish();
      return;
    }
    auto self = shared_from_this();
    backoff_timer = loop->RunAfter(o.retry_backoff, [self]() {
      self->backoff_timer = 0;
      self->Acquire();
    });
  }

  void OnLease(absl::StatusOr<Lease> l) {
    if (!l.ok()) {
      ++acquire_errors;
      Backoff();
      return;
    }
    ++acquired;
    lease = *std::move(l);
    rec = CsRecord();
    rec.worker = o.worker;
    rec.fence = lease.fence;
    rec.token = lease.token;
    rec.start_ns = clock();
    if (in_cs) in_cs(TortureClient::Phase::kBeforeWrite);
    store_error = read_ok = write_ok = false;
    pending = 2;
    auto self = shared_from_this();
    absl::Status s = FencedReadScript().Run(
        *store, {o.keys.reg, o.keys.max}, {absl::StrCat(lease.fence)}, o.store_timeout,
        [self](absl::StatusOr<Reply> r) {
          int64_t flag, v;
          if (!ParsePair(r, &flag, &v)) {
            self->store_error = true;
          } else {
            self->read_ok = flag == 1;
            self->value = v;
          }
          self->ReadDone();
        });
    if (!s.ok()) {
      store_error = true;
      --pending;
    }
    s = store->Send({"GET", o.keys.unf}, o.store_timeout, [self](absl::StatusOr<Reply> r) {
      if (!r.ok() || r->is_error()) {
        self->store_error = true;
      } else {
        self->unf_value = ParseIntOrZero(*r);
      }
      self->ReadDone();
    });
    if (!s.ok()) {
      store_error = true;
      --pending;
    }
    if (pending == 0) ReadDone();
  }

  void ReadDone() {
    if (pending > 0 && --pending > 0) return;
    if (store_error) {
      EndCs(CsOutcome::kStoreError);
      return;
    }
    auto self = shared_from_this();
    loop->RunAfter(o.hold, [self]() { self->Write(); });
  }

  void Write() {
    // A careful holder checks its lease before acting on it; what the check
    // cannot cover (a pause right after it) is what fencing is for.
    if (o.check_deadline && loop->Now() >= lease.deadline) {
      EndCs(CsOutcome::kExpiredLocally);
      return;
    }
    // Published before anything is sent: a pause that still sees
    // kBeforeWrite has not sent the write.
    if (in_cs) in_cs(TortureClient::Phase::kWriteSent);
    auto self = shared_from_this();
    pending = 0;
    auto count = [self](absl::StatusOr<Reply> r) {
      if (!r.ok() || r->is_error()) self->store_error = true;
      self->WriteDone();
    };
    if (read_ok) {
      ++pending;
      absl::Status s = FencedWriteScript().Run(
          *store, {o.keys.reg, o.keys.max, o.keys.acc},
          {absl::StrCat(lease.fence), absl::StrCat(value + 1)}, o.store_timeout,
          [self](absl::StatusOr<Reply> r) {
            int64_t flag, v;
            if (!ParsePair(r, &flag, &v)) {
              self->store_error = true;
            } else {
              self->write_ok = flag == 1;
            }
            self->WriteDone();
          });
      if (!s.ok()) {
        store_error = true;
        --pending;
      }
    }
    for (auto argv : {std::vector<std::string>{"SET", o.keys.unf, absl::StrCat(unf_value + 1)},
                      std::vector<std::string>{"INCR", o.keys.unf_n}}) {
      ++pending;
      if (!store->Send(std::move(argv), o.store_timeout, count).ok()) {
        store_error = true;
        --pending;
      }
    }
    if (pending == 0) {
      pending = 1;
      WriteDone();
    }
  }

  void WriteDone() {
    if (--pending > 0) return;
    CsOutcome out;
    if (store_error) {
      out = CsOutcome::kStoreError;
    } else if (!read_ok) {
      out = CsOutcome::kReadRejected;
    } else if (!write_ok) {
      out = CsOutcome::kWriteRejected;
    } else {
      out = CsOutcome::kWritten;
    }
    EndCs(out);
  }

  void EndCs(CsOutcome out) {
    rec.end_ns = clock();
    rec.outcome = out;
    if (in_cs) in_cs(TortureClient::Phase::kOut);
    if (sink) sink(rec);
    auto self = shared_from_this();
    ReleaseRecord rel;
    rel.worker = o.worker;
    rel.token = lease.token;
    rel.sent_ns = clock();
    absl::Status s = lock->Release(lease, [self, rel](absl::Status st) mutable {
      rel.done_ns = self->clock();
      rel.code = st.code();
      if (self->release_sink) self->release_sink(rel);
      self->Acquire();
    });
    if (!s.ok()) {
      rel.done_ns = rel.sent_ns;
      rel.code = s.code();
      if (release_sink) release_sink(rel);
      Acquire();
    }
  }
};

TortureClient::TortureClient(EventLoop* loop, Lock* lock, Transport* store,
                             ClientOptions options, Clock clock, Sink sink, InCs in_cs)
    : state_(std::make_shared<State>()) {
  state_->loop = loop;
  state_->lock = lock;
  state_->store = store;
  state_->o = std::move(options);
  state_->clock = std::move(clock);
  state_->sink = std::move(sink);
  state_->in_cs = std::move(in_cs);
}

TortureClient::~TortureClient() {
  state_->stopping = true;
  if (state_->backoff_timer != 0) state_->loop->Cancel(state_->backoff_timer);
  state_->on_stopped = nullptr;
}

void TortureClient::set_release_sink(ReleaseSink sink) {
  state_->release_sink = std::move(sink);
}

void TortureClient::Start() { state_->Acquire(); }

void TortureClient::Stop(std::function<void()> done) {
  state_->stopping = true;
  state_->on_stopped = std::move(done);
  if (state_->finished) {
    auto d = std::move(state_->on_stopped);
    if (d) d();
    return;
  }
  if (state_->backoff_timer != 0 && state_->loop->Cancel(state_->backoff_timer)) {
    state_->backoff_timer = 0;
    state_->Finish();
  }
}

int64_t TortureClient::acquired() const { return state_->acquired; }
int64_t TortureClient::acquire_errors() const { return state_->acquire_errors; }

int64_t CountOverlaps(std::vector<CsRecord> records) {
  std::sort(records.begin(), records.end(),
            [](const CsRecord& a, const CsRecord& b) { return a.start_ns < b.start_ns; });
  int64_t pairs = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    for (size_t j = i + 1; j < records.size() && records[j].start_ns < records[i].end_ns; ++j) {
      if (records[j].worker != records[i].worker) ++pairs;
    }
  }
  return pairs;
}

ReadWriteOverlaps CountReadWriteOverlaps(std::vector<CsRecord> records,
                                         const std::function<bool(int)>& is_reader) {
  std::sort(records.begin(), records.end(),
            [](const CsRecord& a, const CsRecord& b) { return a.start_ns < b.start_ns; });
  ReadWriteOverlaps o;
  for (size_t i = 0; i < records.size(); ++i) {
    const bool ri = is_reader(records[i].worker);
    for (size_t j = i + 1; j < records.size() && records[j].start_ns < records[i].end_ns; ++j) {
      if (records[j].worker == records[i].worker) continue;
      const bool rj = is_reader(records[j].worker);
      if (ri != rj) ++o.reader_writer;
      if (!ri && !rj) ++o.writer_writer;
    }
  }
  return o;
}

int64_t MaxConcurrent(const std::vector<CsRecord>& records) {
  // Sweep over the endpoints; at equal times an end comes before a start
  // (half-open intervals).
  std::vector<std::pair<int64_t, int>> events;
  for (const CsRecord& r : records) {
    events.emplace_back(r.start_ns, +1);
    events.emplace_back(r.end_ns, -1);
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0, most = 0;
  for (const auto& e : events) {
    now += e.second;
    most = std::max(most, now);
  }
  return most;
}

Report CheckRecords(std::vector<CsRecord> records, const Counters& c) {
  Report r;
  for (const CsRecord& rec : records) {
    ++r.cs_attempted;
    switch (rec.outcome) {
      case CsOutcome::kWritten: ++r.cs_completed; break;
      case CsOutcome::kReadRejected:
      case CsOutcome::kWriteRejected: ++r.stale_rejected; break;
      case CsOutcome::kExpiredLocally: ++r.expired_locally; break;
      case CsOutcome::kStoreError: ++r.store_errors; break;
    }
  }
  r.overlaps = CountOverlaps(std::move(records));
  r.lost_fenced = c.acc - c.reg;
  r.lost_unfenced = c.unf_n - c.unf;
  r.acc_vs_records = c.acc - r.cs_completed;
  return r;
}

std::vector<std::string> ReadCountersCommand() {
  StoreKeys keys;
  return {"MGET", keys.reg, keys.acc, keys.unf, keys.unf_n};
}

absl::StatusOr<Counters> ParseCounters(const Reply& mget) {
  if (!mget.is_array() || mget.elements.size() != 4) {
    return absl::InternalError(absl::StrCat("MGET: ", mget.DebugString()));
  }
  Counters c;
  c.reg = ReplyToInt(mget.elements[0]);
  c.acc = ReplyToInt(mget.elements[1]);
  c.unf = ReplyToInt(mget.elements[2]);
  c.unf_n = ReplyToInt(mget.elements[3]);
  return c;
}

int64_t ReplyToInt(const Reply& r) {
  if (r.is_string()) return std::strtoll(r.str.c_str(), nullptr, 10);
  if (r.is_integer()) return r.integer;
  return 0;
}

}  // namespace torture
}  // namespace dlock
