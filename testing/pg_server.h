// This header defines `PgServer`, a test helper: a private PostgreSQL
// server (//testing:pg_process, see pg_process.h for where, as whom and how
// it is stopped) plus `Query`, which runs SQL on a libpq connection of the
// helper's own, for test setup and inspection; it is not the code under
// test.
//
// Example:
//   ASSERT_OK_AND_ASSIGN(auto pg, PgServer::Start());
//   ASSERT_OK(pg->Query("CREATE TABLE t (id int PRIMARY KEY, v int)").status());
//   ... PgFencedStore::Connect({.conninfo = pg->conninfo()}) ...
//   EXPECT_THAT(pg->QueryValue("SELECT v FROM t WHERE id = 1"), IsOkAndHolds("2"));
//
// This class is thread-compatible.
#ifndef DLOCK_TESTING_PG_SERVER_H_
#define DLOCK_TESTING_PG_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dlock/testing/pg_process.h"

struct pg_conn;

namespace dlock {
namespace test_support {

class PgServer {
 public:
  // See PgProcess::Start.
  static absl::StatusOr<std::unique_ptr<PgServer>> Start(PgProcessOptions options = {});
  ~PgServer();

  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  PgProcess& process() { return *process_; }
  int port() const { return process_->port(); }
  std::string conninfo() const { return process_->conninfo(); }

  // Runs `sql` (one or more statements, no parameters) on the helper's own
  // connection, reconnecting first when it was lost (e.g. after Restart).
  // Rows of the last statement, each a vector of text values ("" for NULL).
  // kUnavailable when the server cannot be reached, kInternal for an error
  // reply (message included).
  absl::StatusOr<std::vector<std::vector<std::string>>> Query(const std::string& sql);
  // The single value of a one-row, one-column result; kNotFound when the
  // result has no row.
  absl::StatusOr<std::string> QueryValue(const std::string& sql);

  absl::Status Pause() { return process_->Pause(); }
  absl::Status Resume() { return process_->Resume(); }
  absl::Status Kill();
  absl::Status Restart();

 private:
  explicit PgServer(std::unique_ptr<PgProcess> process) : process_(std::move(process)) {}
  void Disconnect();

  std::unique_ptr<PgProcess> process_;
  ::pg_conn* conn_ = nullptr;
};

}  // namespace test_support
}  // namespace dlock

#endif  // DLOCK_TESTING_PG_SERVER_H_
