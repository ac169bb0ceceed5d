#include "dlock/fenced/pg_store.h"

#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "dlock/fenced/fence_status.h"
#include "postgresql/libpq-fe.h"

namespace dlock {
namespace fenced {
namespace {

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(c) || c == '_')) return false;
  }
  return true;
}

// "name" or "schema.name" -> "\"name\"" / "\"schema\".\"name\"" (validated,
// so quoting cannot be escaped).
absl::StatusOr<std::string> QuoteTableName(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  if (parts.size() > 2) parts.clear();
  std::string out;
  for (absl::string_view p : parts) {
    if (!IsIdentifier(p)) {
      parts.clear();
      break;
    }
    absl::StrAppend(&out, out.empty() ? "" : ".", "\"", p, "\"");
  }
  if (parts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PgFencedStore: fence table name \"", name,
        "\" is not [schema.]name of letters, digits and '_' (at most 63 each)"));
  }
  return out;
}

std::string Trimmed(const char* message) {
  return std::string(absl::StripTrailingAsciiWhitespace(message == nullptr ? "" : message));
}

// The status for an error result of a statement (the connection still up
// or not: `lost`).
absl::Status FromErrorResult(const PGresult* res, bool lost, absl::string_view phase,
                             const std::string& conn_message) {
  const char* state_c = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = state_c != nullptr ? state_c : "";
  std::string message = res != nullptr ? Trimmed(PQresultErrorMessage(res)) : "";
  if (message.empty()) message = conn_message;
  const std::string text =
      absl::StrCat("PostgreSQL ", phase, ": ", state.empty() ? "" : absl::StrCat("[", state, "] "),
                   message);
  if (lost || absl::StartsWith(state, "08") || absl::StartsWith(state, "57P") ||
      absl::StartsWith(state, "53")) {
    return absl::UnavailableError(text);
  }
  if (state == "57014") return absl::DeadlineExceededError(text);
  if (state == "40001" || state == "40P01") return absl::AbortedError(text);
  if (state == "42P01" || state == "3F000") return absl::NotFoundError(text);
  if (absl::StartsWith(state, "42") || absl::StartsWith(state, "22")) {
    return absl::InvalidArgumentError(text);
  }
  if (absl::StartsWith(state, "23")) return absl::FailedPreconditionError(text);
  if (absl::StartsWith(state, "XX")) return absl::InternalError(text);
  return absl::UnavailableError(text);
}

// Adds `suffix` to a status's message, keeping its code and payloads.
absl::Status Annotate(const absl::Status& s, absl::string_view suffix) {
  absl::Status out(s.code(), absl::StrCat(s.message(), suffix));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgFencedStore>> PgFencedStore::Connect(PgStoreOptions options) {
  absl::StatusOr<std::string> table = QuoteTableName(options.fence_table);
  if (!table.ok()) return table.status();
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PgFencedStore: timeout must be > 0");
  }
  std::unique_ptr<PgFencedStore> store(new PgFencedStore(std::move(options), *table));
  absl::Status s = store->EnsureConnected();
  if (!s.ok()) return s;
  return store;
}

PgFencedStore::~PgFencedStore() { Drop(); }

void PgFencedStore::Drop() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

absl::Status PgFencedStore::EnsureConnected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK &&
      PQtransactionStatus(conn_) == PQTRANS_IDLE) {
    return absl::OkStatus();
  }
  Drop();
  // connect_timeout first, so the caller's conninfo (expanded from dbname)
  // overrides it.
  const char* keywords[] = {"connect_timeout", "dbname", nullptr};
  const char* values[] = {"5", options_.conninfo.c_str(), nullptr};
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options_.conninfo.c_str(), &parse_error);
  if (parsed == nullptr) {
    absl::Status s = absl::InvalidArgumentError(
        absl::StrCat("PgFencedStore: bad conninfo: ", Trimmed(parse_error)));
    PQfreemem(parse_error);
    return s;
  }
  PQconninfoFree(parsed);
  conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    absl::Status s = absl::UnavailableError(absl::StrCat(
        "PgFencedStore: cannot connect to PostgreSQL: ",
        conn_ != nullptr ? Trimmed(PQerrorMessage(conn_)) : std::string("out of memory")));
    Drop();
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<PgResult> PgFencedStore::Run(const std::string& sql,
                                            const std::vector<PgParam>& params,
                                            absl::Time deadline, absl::string_view phase) {
  if (conn_ == nullptr) return absl::UnavailableError("PgFencedStore: not connected");
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const PgParam& p : params) values.push_back(p.has_value() ? p->c_str() : nullptr);
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                        values.data(), nullptr, nullptr, 0) == 0) {
    absl::Status s = FromErrorResult(nullptr, /*lost=*/true, phase, Trimmed(PQerrorMessage(conn_)));
    Drop();
    return s;
  }
  // Wait for the whole reply, at most until `deadline`.
  while (true) {
    if (PQconsumeInput(conn_) == 0) {
      absl::Status s =
          FromErrorResult(nullptr, /*lost=*/true, phase, Trimmed(PQerrorMessage(conn_)));
      Drop();
      return s;
    }
    if (PQisBusy(conn_) == 0) break;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      Drop();  // the server rolls back an open transaction of a closed connection
      return absl::DeadlineExceededError(absl::StrCat(
          "PostgreSQL ", phase, ": no reply within ", absl::FormatDuration(options_.timeout),
          "; connection dropped"));
    }
    pollfd pfd = {PQsocket(conn_), POLLIN, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR) {
      Drop();
      return absl::UnavailableError(absl::StrCat("PostgreSQL ", phase, ": poll failed"));
    }
  }
  PgResult out;
  absl::Status error;
  bool have_error = false;
  while (PGresult* res = PQgetResult(conn_)) {
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      out = PgResult();
      for (int r = 0; r < PQntuples(res); ++r) {
        std::vector<absl::optional<std::string>> row;
        for (int c = 0; c < PQnfields(res); ++c) {
          if (PQgetisnull(res, r, c)) {
            row.emplace_back(absl::nullopt);
          } else {
            row.emplace_back(std::string(PQgetvalue(res, r, c), PQgetlength(res, r, c)));
          }
        }
        out.rows.push_back(std::move(row));
      }
      int64_t affected = 0;
      if (absl::SimpleAtoi(PQcmdTuples(res), &affected)) out.affected = affected;
      if (st == PGRES_COMMAND_OK && absl::string_view(PQcmdStatus(res)) == "ROLLBACK" &&
          absl::StartsWith(sql, "COMMIT") && !have_error) {
        // COMMIT of a transaction that had failed: rolled back.
        error = absl::AbortedError(absl::StrCat("PostgreSQL ", phase, ": rolled back"));
        have_error = true;
      }
    } else if (!have_error) {
      error = FromErrorResult(res, PQstatus(conn_) != CONNECTION_OK, phase,
                              Trimmed(PQerrorMessage(conn_)));
      have_error = true;
    }
    PQclear(res);
  }
  if (PQstatus(conn_) != CONNECTION_OK) {
    if (!have_error) {
      error = FromErrorResult(nullptr, true, phase, Trimmed(PQerrorMessage(conn_)));
      have_error = true;
    }
    Drop();
  }
  if (have_error) return error;
  return out;
}

void PgFencedStore::RollbackQuietly(absl::Time deadline) {
  if (conn_ == nullptr) return;
  if (!Run("ROLLBACK", {}, deadline, "ROLLBACK").ok()) Drop();
}

absl::Status PgFencedStore::CreateFenceTable() {
  absl::Status s = EnsureConnected();
  if (!s.ok()) return s;
  return Run(absl::StrCat("CREATE TABLE IF NOT EXISTS ", table_,
                          " (resource text PRIMARY KEY, fence bigint NOT NULL CHECK (fence >= 0))"),
             {}, absl::Now() + options_.timeout, "CREATE TABLE")
      .status();
}

absl::StatusOr<PgResult> PgFencedStore::Exec(const std::string& sql,
                                             const std::vector<PgParam>& params) {
  absl::Status s = EnsureConnected();
  if (!s.ok()) return s;
  return Run(sql, params, absl::Now() + options_.timeout, "statement");
}

absl::StatusOr<int64_t> PgFencedStore::HighestFence(absl::string_view resource) {
  if (resource.empty()) return absl::InvalidArgumentError("HighestFence: empty resource name");
  absl::Status s = EnsureConnected();
  if (!s.ok()) return s;
  absl::StatusOr<PgResult> r =
      Run(absl::StrCat("SELECT fence FROM ", table_, " WHERE resource = $1"),
          {std::string(resource)}, absl::Now() + options_.timeout, "read fence");
  if (!r.ok()) return r.status();
  int64_t fence = 0;
  if (r->rows.empty() || !r->rows[0][0].has_value() || !absl::SimpleAtoi(*r->rows[0][0], &fence) ||
      fence == 0) {
    return absl::NotFoundError(
        absl::StrCat("no fence recorded for resource \"", resource, "\" in ", table_));
  }
  return fence;
}

absl::StatusOr<PgResult> PgFencedStore::Write(absl::string_view resource, int64_t fence,
                                              const std::string& sql,
                                              const std::vector<PgParam>& params) {
  absl::Status s = CheckFenceArgs(resource, fence);
  if (!s.ok()) return s;
  const absl::Time deadline = absl::Now() + options_.timeout;
  s = EnsureConnected();
  if (!s.ok()) return Annotate(s, "; nothing applied");
  const std::string res(resource);
  const std::string fence_text = absl::StrCat(fence);
  constexpr absl::string_view kNothing = "; rolled back, nothing applied";

  absl::StatusOr<PgResult> r = Run("BEGIN ISOLATION LEVEL READ COMMITTED", {}, deadline, "BEGIN");
  if (!r.ok()) return Annotate(r.status(), "; nothing applied");
  r = Run(absl::StrCat("SET LOCAL statement_timeout = ",
                       absl::ToInt64Milliseconds(options_.timeout) + 1),
          {}, deadline, "SET statement_timeout");
  if (r.ok()) {
    r = Run(absl::StrCat("INSERT INTO ", table_,
                         " (resource, fence) VALUES ($1, 0) ON CONFLICT (resource) DO NOTHING"),
            {res}, deadline, "record resource");
  }
  if (r.ok()) {
    r = Run(absl::StrCat("SELECT fence, pg_current_xact_id()::text FROM ", table_,
                         " WHERE resource = $1 FOR UPDATE"),
            {res}, deadline, "lock fence row");
  }
  if (!r.ok()) {
    RollbackQuietly(deadline);
    if (absl::IsNotFound(r.status())) {
      return absl::NotFoundError(absl::StrCat(
          "fence table ", table_, " does not exist (PgFencedStore::CreateFenceTable creates it): ",
          r.status().message()));
    }
    return Annotate(r.status(), kNothing);
  }
  int64_t highest = 0;
  std::string xid;
  if (r->rows.size() != 1 || !r->rows[0][0].has_value() || !r->rows[0][1].has_value() ||
      !absl::SimpleAtoi(*r->rows[0][0], &highest)) {
    RollbackQuietly(deadline);
    return absl::InternalError(absl::StrCat("fence table ", table_, ": no fence row for \"", res,
                                            "\" after inserting it", kNothing));
  }
  xid = *r->rows[0][1];
  if (fence < highest) {
    RollbackQuietly(deadline);
    return StaleFenceError(resource, fence, highest);
  }
  if (fence > highest) {
    r = Run(absl::StrCat("UPDATE ", table_, " SET fence = $2 WHERE resource = $1"),
            {res, fence_text}, deadline, "record fence");
    if (!r.ok()) {
      RollbackQuietly(deadline);
      return Annotate(r.status(), kNothing);
    }
  }
  absl::StatusOr<PgResult> user = Run(sql, params, deadline, "fenced statement");
  if (!user.ok()) {
    RollbackQuietly(deadline);
    return Annotate(user.status(), absl::StrCat(kNothing, ", fence not recorded"));
  }
  r = Run("COMMIT", {}, deadline, "COMMIT");
  if (r.ok()) return user;
  if (absl::IsAborted(r.status())) return Annotate(r.status(), kNothing);
  if (conn_ == nullptr) {
    // The connection broke (or timed out) after COMMIT was sent: the
    // outcome is unknown until the server says.
    return ResolveCommit(xid, resource, std::move(*user), r.status());
  }
  RollbackQuietly(deadline);
  return Annotate(r.status(), kNothing);
}

absl::StatusOr<PgResult> PgFencedStore::ResolveCommit(const std::string& xid,
                                                      absl::string_view resource,
                                                      PgResult applied,
                                                      const absl::Status& lost) {
  // (Not `StatusOr r = s`: a StatusOr made from an OK status aborts.)
  absl::Status s = EnsureConnected();
  absl::StatusOr<PgResult> r = absl::UnavailableError("not connected");
  if (!s.ok()) {
    r = s;
  } else {
    r = Run("SELECT pg_xact_status($1::xid8)", {xid}, absl::Now() + options_.timeout,
            "transaction status");
  }
  if (r.ok() && r->rows.size() == 1 && r->rows[0][0].has_value()) {
    if (*r->rows[0][0] == "committed") return applied;
    if (*r->rows[0][0] == "aborted") {
      return absl::UnavailableError(absl::StrCat(
          lost.message(), "; the server reports the transaction aborted: nothing applied"));
    }
  }
  return absl::UnknownError(absl::StrCat(
      "fenced write to \"", resource, "\": ", lost.message(),
      "; connection lost after COMMIT was sent and the outcome could not be learned "
      "(transaction ", xid, "): check before retrying"));
}

}  // namespace fenced
}  // namespace dlock
