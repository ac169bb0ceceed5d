#include "dlock/testing/pg_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "postgresql/libpq-fe.h"

namespace dlock {
namespace test_support {

absl::StatusOr<std::unique_ptr<PgServer>> PgServer::Start(PgProcessOptions options) {
  absl::StatusOr<std::unique_ptr<PgProcess>> p = PgProcess::Start(std::move(options));
  if (!p.ok()) return p.status();
  return std::unique_ptr<PgServer>(new PgServer(std::move(*p)));
}

PgServer::~PgServer() { Disconnect(); }

void PgServer::Disconnect() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

// The server goes first, then the helper's connection: closing it first
// would end its session (and release its locks) before the server goes.
absl::Status PgServer::Kill() {
  absl::Status s = process_->Kill();
  Disconnect();
  return s;
}

absl::Status PgServer::Restart() {
  absl::Status s = process_->Stop();
  Disconnect();
  if (!s.ok()) return s;
  return process_->Restart();
}

absl::StatusOr<std::vector<std::vector<std::string>>> PgServer::Query(const std::string& sql) {
  if (conn_ != nullptr && PQstatus(conn_) != CONNECTION_OK) Disconnect();
  if (conn_ == nullptr) {
    conn_ = PQconnectdb(conninfo().c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      absl::Status s = absl::UnavailableError(
          absl::StrCat("PgServer: cannot connect: ", PQerrorMessage(conn_)));
      Disconnect();
      return s;
    }
  }
  PGresult* res = PQexec(conn_, sql.c_str());
  const ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    absl::Status s = PQstatus(conn_) != CONNECTION_OK
                         ? absl::UnavailableError(absl::StrCat("PgServer: ", PQerrorMessage(conn_)))
                         : absl::InternalError(absl::StrCat("PgServer: ", sql, ": ",
                                                            PQresultErrorMessage(res)));
    PQclear(res);
    return s;
  }
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < PQntuples(res); ++r) {
    std::vector<std::string> row;
    for (int c = 0; c < PQnfields(res); ++c) row.emplace_back(PQgetvalue(res, r, c));
    rows.push_back(std::move(row));
  }
  PQclear(res);
  return rows;
}

absl::StatusOr<std::string> PgServer::QueryValue(const std::string& sql) {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = Query(sql);
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty()) {
    return absl::NotFoundError(absl::StrCat("PgServer: no row: ", sql));
  }
  return rows->front().front();
}

}  // namespace test_support
}  // namespace dlock
